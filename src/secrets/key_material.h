// The secret store's master key file and the subkeys derived from it (docs/secrets.md).
//
// The key file (AIR_HOME/secrets/key, mode 0600) holds 56 bytes: magic "AIRK", a u32 format
// version (1), the 32-byte master key and a 16-byte BLAKE2b checksum of the preceding 40 bytes,
// so a damaged or truncated key file is reported as such instead of failing every decryption.
// From the master key, libsodium's KDF derives three independent values: the secretbox key
// that encrypts values, the HMAC key that authenticates the whole store file, and a public
// 16-byte key id written in the store header to detect a store/key mismatch.
// KeyMaterial wipes its bytes on destruction; it is movable, not copyable, and immutable after
// construction (safe to read from several threads).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "base/env.h"
#include "base/status.h"

namespace air::secrets {

inline constexpr size_t kMasterKeyBytes = 32;
inline constexpr size_t kKeyIdBytes = 16;
inline constexpr size_t kKeyFileBytes = 4 + 4 + kMasterKeyBytes + 16;

// libsodium must be initialised once per process before any other call; idempotent and
// thread-safe.
Status EnsureSodium();

class KeyMaterial {
 public:
  // Derives the subkeys from a 32-byte master key.
  static KeyMaterial FromMasterKey(const uint8_t (&master)[kMasterKeyBytes]);

  KeyMaterial(KeyMaterial&& other) noexcept;
  KeyMaterial& operator=(KeyMaterial&& other) noexcept;
  KeyMaterial(const KeyMaterial&) = delete;
  KeyMaterial& operator=(const KeyMaterial&) = delete;
  ~KeyMaterial();

  const uint8_t* box_key() const { return box_key_.data(); }
  const uint8_t* auth_key() const { return auth_key_.data(); }
  const std::array<uint8_t, kKeyIdBytes>& key_id() const { return key_id_; }
  // Lowercase hex of key_id(), for messages.
  std::string KeyIdHex() const;

 private:
  KeyMaterial() = default;
  void Wipe();

  std::array<uint8_t, 32> box_key_{};
  std::array<uint8_t, 32> auth_key_{};
  std::array<uint8_t, kKeyIdBytes> key_id_{};
};

// Reads and checks the key file at `path` (exact size, magic, version, checksum, and that no
// one but the owner can read it). NotFound when it does not exist.
Result<KeyMaterial> LoadKeyFile(Env* env, const std::string& path);

// Creates a key file with 32 fresh random bytes at `path` (mode 0600, atomic). The caller
// holds the store's exclusive lock and has checked that no key file exists.
Result<KeyMaterial> CreateKeyFile(Env* env, const std::string& path);

}  // namespace air::secrets
