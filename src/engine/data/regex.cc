// PCRE2 wrapper for the tokenizer (see regex.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/data/regex.h"

#include <fmt/format.h>
#include <pcre2.h>

namespace air::engine {
namespace {

// Unicode White_Space, as a character-class body.
constexpr std::string_view kWhiteSpaceClassBody =
    R"(\t\n\x0B\f\r\x20\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F})"
    R"(\x{205F}\x{3000})";

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};
struct JitStackDeleter {
  void operator()(pcre2_jit_stack* stack) const { pcre2_jit_stack_free(stack); }
};
struct MatchContextDeleter {
  void operator()(pcre2_match_context* context) const { pcre2_match_context_free(context); }
};

std::string PcreErrorText(int code) {
  PCRE2_UCHAR buffer[256];
  int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  return n < 0 ? fmt::format("PCRE2 error {}", code) : std::string(reinterpret_cast<char*>(buffer));
}

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

Result<std::string> RewriteWhitespaceClasses(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  size_t class_start = 0;  // index just past '[' or '[^' of the open class
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char e = pattern[i + 1];
      if (e == 'Q') {  // \Q...\E quotes literally
        size_t end = pattern.find("\\E", i + 2);
        size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
        out.append(pattern.substr(i, stop - i));
        i = stop - 1;
        continue;
      }
      if (e == 's') {
        if (in_class) {
          out.append(kWhiteSpaceClassBody);
        } else {
          out.append("[").append(kWhiteSpaceClassBody).append("]");
        }
        ++i;
        continue;
      }
      if (e == 'S') {
        if (in_class) {
          return InvalidArgument(fmt::format(
              "\\S inside a character class at offset {} cannot be translated to Unicode "
              "white space; write the class with [^...] and \\s instead",
              i));
        }
        out.append("[^").append(kWhiteSpaceClassBody).append("]");
        ++i;
        continue;
      }
      out.push_back(c);
      out.push_back(e);
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') {
        out.push_back('^');
        ++i;
      }
      class_start = i + 1;
      continue;
    }
    if (in_class) {
      if (c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {  // [:alpha:]
        size_t end = pattern.find(":]", i + 2);
        if (end != std::string_view::npos) {
          out.append(pattern.substr(i, end + 2 - i));
          i = end + 1;
          continue;
        }
      }
      if (c == ']' && i != class_start) in_class = false;
    }
    out.push_back(c);
  }
  return out;
}

Result<Regex> Regex::Compile(std::string_view pattern, const std::string& where) {
  auto rewritten = RewriteWhitespaceClasses(pattern);
  if (!rewritten.ok()) return rewritten.status().WithContext(where);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten->data()), rewritten->size(),
                    PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    return InvalidArgument(fmt::format("{}: invalid regex /{}/: {} (near offset {})", where,
                                       pattern, PcreErrorText(error_code), error_offset));
  }
  auto holder = std::make_shared<Code>();
  holder->code = code;
  uint32_t jit_available = 0;
  pcre2_config(PCRE2_CONFIG_JIT, &jit_available);
  holder->jit = jit_available != 0 && pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return Regex(std::move(holder), std::string(pattern));
}

Result<std::vector<std::pair<size_t, size_t>>> Regex::FindAll(std::string_view subject) const {
  std::vector<std::pair<size_t, size_t>> matches;
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> data(
      pcre2_match_data_create_from_pattern(code_->code, nullptr));
  // A larger JIT stack is made only when a long subject exhausts the default 32 KiB one.
  std::unique_ptr<pcre2_jit_stack, JitStackDeleter> big_stack;
  std::unique_ptr<pcre2_match_context, MatchContextDeleter> context;
  const auto* text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t offset = 0;
  while (offset <= subject.size()) {
    int rc = pcre2_match(code_->code, text, subject.size(), offset, PCRE2_NO_UTF_CHECK, data.get(),
                         context.get());
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !big_stack) {
      big_stack.reset(pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr));
      context.reset(pcre2_match_context_create(nullptr));
      pcre2_jit_stack_assign(context.get(), nullptr, big_stack.get());
      continue;
    }
    if (rc < 0) {
      return Internal(fmt::format("regex /{}/ failed on a {}-byte text: {}", pattern_,
                                  subject.size(), PcreErrorText(rc)));
    }
    PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    size_t begin = ovector[0], end = ovector[1];
    matches.emplace_back(begin, end);
    if (end > begin) {
      offset = end;
    } else {  // empty match: step over one code point
      if (end >= subject.size()) break;
      offset = end + 1;
      while (offset < subject.size() && (static_cast<uint8_t>(subject[offset]) & 0xC0) == 0x80) {
        ++offset;
      }
    }
  }
  return matches;
}

Result<bool> Regex::Search(std::string_view subject) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> data(
      pcre2_match_data_create_from_pattern(code_->code, nullptr));
  int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), 0,
                       PCRE2_NO_UTF_CHECK, data.get(), nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) return Internal(fmt::format("regex /{}/: {}", pattern_, PcreErrorText(rc)));
  return true;
}

}  // namespace air::engine
