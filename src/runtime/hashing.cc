// SHA-256 over libsodium's crypto_hash_sha256.
#include "runtime/hashing.h"

#include <sodium.h>

#include <cstring>

namespace air::runtime {
namespace {

std::string Hex(const unsigned char* digest, size_t n) {
  return HexEncode(std::string_view(reinterpret_cast<const char*>(digest), n));
}

crypto_hash_sha256_state* State(unsigned char* storage) {
  static_assert(sizeof(crypto_hash_sha256_state) <= 128);
  return reinterpret_cast<crypto_hash_sha256_state*>(storage);
}

}  // namespace

std::string HexEncode(std::string_view bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto byte = static_cast<unsigned char>(bytes[i]);
    out[2 * i] = kDigits[byte >> 4];
    out[2 * i + 1] = kDigits[byte & 15];
  }
  return out;
}

std::optional<std::string> HexDecode(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < hex.size(); ++i) {
    char c = hex[i];
    int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return std::nullopt;
    out[i / 2] = static_cast<char>((static_cast<unsigned char>(out[i / 2]) << 4) | digit);
  }
  return out;
}

Sha256::Sha256() { crypto_hash_sha256_init(State(state_)); }

void Sha256::Update(std::string_view data) {
  crypto_hash_sha256_update(State(state_), reinterpret_cast<const unsigned char*>(data.data()),
                            data.size());
}

std::string Sha256::FinishHex() {
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(State(state_), digest);
  return Hex(digest, sizeof(digest));
}

std::string Sha256Hex(std::string_view data) {
  Sha256 hash;
  hash.Update(data);
  return hash.FinishHex();
}

}  // namespace air::runtime
