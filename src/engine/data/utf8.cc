// UTF-8 helpers and the GPT-2 byte-level alphabet (see utf8.h).
#include "engine/data/utf8.h"

#include <array>

namespace air::engine {
namespace {

// Number of bytes a sequence starting with `lead` needs, or 0 for a byte that cannot lead.
size_t ExpectedLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Whether `byte` may follow `lead` as the byte at index `index` (>= 1) of its sequence. The
// second byte's range is narrowed for E0/ED/F0/F4 to exclude overlongs, surrogates and values
// past U+10FFFF (Unicode Table 3-7).
bool ContinuationOk(uint8_t lead, size_t index, uint8_t byte) {
  if (index == 1) {
    switch (lead) {
      case 0xE0:
        return byte >= 0xA0 && byte <= 0xBF;
      case 0xED:
        return byte >= 0x80 && byte <= 0x9F;
      case 0xF0:
        return byte >= 0x90 && byte <= 0xBF;
      case 0xF4:
        return byte >= 0x80 && byte <= 0x8F;
      default:
        break;
    }
  }
  return byte >= 0x80 && byte <= 0xBF;
}

// Length of the well-formed prefix of a (possibly invalid) sequence at pos: equals the expected
// length for a valid sequence; otherwise the length of the maximal subpart (at least 1).
size_t WellFormedPrefix(std::string_view s, size_t pos, size_t* expected) {
  auto lead = static_cast<uint8_t>(s[pos]);
  *expected = ExpectedLength(lead);
  if (*expected <= 1) return 1;
  size_t i = 1;
  while (i < *expected && pos + i < s.size() &&
         ContinuationOk(lead, i, static_cast<uint8_t>(s[pos + i]))) {
    ++i;
  }
  return i;
}

struct ByteLevelTables {
  std::array<char32_t, 256> byte_to_cp{};
  std::array<std::string, 256> byte_to_text;
  std::array<int16_t, 324> cp_to_byte{};  // every alphabet code point is below U+0144
};

ByteLevelTables BuildTables() {
  ByteLevelTables t;
  t.cp_to_byte.fill(-1);
  // Printable bytes map to themselves; the rest get U+0100, U+0101, ... in byte order.
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    char32_t cp = printable(b) ? static_cast<char32_t>(b) : next++;
    t.byte_to_cp[b] = cp;
    AppendUtf8(cp, &t.byte_to_text[b]);
    t.cp_to_byte[cp] = static_cast<int16_t>(b);
  }
  return t;
}

const ByteLevelTables& Tables() {
  static const ByteLevelTables tables = BuildTables();
  return tables;
}

}  // namespace

size_t Utf8SequenceLength(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  size_t expected = 0;
  size_t got = WellFormedPrefix(s, pos, &expected);
  return got == expected ? got : 0;
}

char32_t DecodeUtf8At(std::string_view s, size_t pos, size_t* length) {
  auto lead = static_cast<uint8_t>(s[pos]);
  size_t n = ExpectedLength(lead);
  if (n <= 1) {
    *length = 1;
    return lead;
  }
  char32_t cp = lead & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<uint8_t>(s[pos + i]) & 0x3F);
  *length = n;
  return cp;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsPythonWhiteSpace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

size_t CountCodePoints(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t expected = 0;
    size_t got = WellFormedPrefix(bytes, pos, &expected);
    if (got == expected) {
      out.append(bytes.substr(pos, got));
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD
    }
    pos += got;
  }
  return out;
}

std::string_view ByteToUnicode(uint8_t byte) { return Tables().byte_to_text[byte]; }

int UnicodeToByte(char32_t cp) {
  const auto& table = Tables().cp_to_byte;
  return cp < table.size() ? table[cp] : -1;
}

void AppendByteLevel(std::string_view bytes, std::string* out) {
  const auto& table = Tables().byte_to_text;
  for (char c : bytes) out->append(table[static_cast<uint8_t>(c)]);
}

bool ByteLevelToBytes(std::string_view token, std::string* out) {
  std::string bytes;
  bytes.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    if (Utf8SequenceLength(token, pos) == 0) return false;
    size_t len = 0;
    int b = UnicodeToByte(DecodeUtf8At(token, pos, &len));
    if (b < 0) return false;
    bytes.push_back(static_cast<char>(b));
    pos += len;
  }
  out->append(bytes);
  return true;
}

}  // namespace air::engine
