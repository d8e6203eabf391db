// The on-disk format of the secret store file (AIR_HOME/secrets/store), version 1, and the
// sealing of single values. Layout, all integers little-endian (docs/secrets.md has the table):
//
//   "AIRSECRS" | u32 version=1 | key_id[16] | u32 scope_count
//   per scope:  u8 name_len | name | i64 created_us | u32 secret_count
//   per secret: u8 key_len | key | i64 updated_us | nonce[24] | u32 box_len | box
//   tag[32]:    HMAC-SHA-512-256 (crypto_auth) of every preceding byte, under the auth subkey
//
// box = crypto_secretbox_easy("scope/key\0" + value) under the box subkey with a fresh random
// nonce per value: the plaintext names its own scope/key, so a box moved to another entry does
// not open there. Scope and key names are stored in plaintext (authenticated by the tag; see
// docs/secrets.md for why). Parsing checks every length against the file size before reading,
// so a truncated or tampered file yields an error naming the file, never garbage.
// Thread safety: plain values and pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "secrets/key_material.h"

namespace air::secrets {

inline constexpr uint32_t kStoreFormatVersion = 1;
inline constexpr size_t kNonceBytes = 24;
inline constexpr size_t kTagBytes = 32;

// One value as stored: encrypted, with its name and update time in the clear.
struct SealedSecret {
  std::string key;
  int64_t updated_us = 0;
  std::array<uint8_t, kNonceBytes> nonce{};
  std::string box;  // crypto_secretbox_easy output: MAC + ciphertext
};

struct ScopeRecord {
  std::string name;
  int64_t created_us = 0;
  std::vector<SealedSecret> secrets;  // sorted by key
};

// The whole store: scopes sorted by name.
struct StoreContents {
  std::vector<ScopeRecord> scopes;

  ScopeRecord* FindScope(std::string_view name);
  const ScopeRecord* FindScope(std::string_view name) const;
};

const SealedSecret* FindSecret(const ScopeRecord& scope, std::string_view key);

// Encrypts `value` for scope/key with a fresh random nonce.
SealedSecret SealValue(const KeyMaterial& keys, std::string_view scope, std::string_view key,
                       std::string_view value, int64_t updated_us);

// Decrypts a sealed value; DataLoss naming `path` and scope/key if it does not authenticate or
// names another entry.
Result<std::string> OpenValue(const KeyMaterial& keys, std::string_view scope,
                              const SealedSecret& sealed, const std::string& path);

// Encodes the store and appends the authentication tag.
std::string SerializeStore(const StoreContents& contents, const KeyMaterial& keys);

// Decodes and authenticates a store file's bytes. Values stay sealed.
Result<StoreContents> ParseStore(std::string_view bytes, const KeyMaterial& keys,
                                 const std::string& path);

}  // namespace air::secrets
