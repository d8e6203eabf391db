// SHA-256 over libsodium's crypto_hash_sha256.
#include "runtime/hashing.h"

#include <sodium.h>

#include <cstring>

namespace air::runtime {
namespace {

std::string Hex(const unsigned char* digest, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[digest[i] >> 4];
    out[2 * i + 1] = kDigits[digest[i] & 15];
  }
  return out;
}

crypto_hash_sha256_state* State(unsigned char* storage) {
  static_assert(sizeof(crypto_hash_sha256_state) <= 128);
  return reinterpret_cast<crypto_hash_sha256_state*>(storage);
}

}  // namespace

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
