// Key file reading/writing and subkey derivation with libsodium.
#include "secrets/key_material.h"

#include <fmt/format.h>
#include <sodium.h>
#include <sys/stat.h>

#include <cstring>

namespace air::secrets {
namespace {

constexpr char kKeyMagic[4] = {'A', 'I', 'R', 'K'};
constexpr uint32_t kKeyFileVersion = 1;
constexpr char kKdfContext[crypto_kdf_CONTEXTBYTES + 1] = "airsecr1";
constexpr uint64_t kBoxKeyId = 1;
constexpr uint64_t kAuthKeyId = 2;
constexpr uint64_t kPublicKeyIdId = 3;
constexpr size_t kChecksumBytes = 16;
constexpr size_t kChecksummedBytes = kKeyFileBytes - kChecksumBytes;

static_assert(crypto_secretbox_KEYBYTES == 32);
static_assert(crypto_auth_KEYBYTES == 32);
static_assert(crypto_kdf_KEYBYTES == kMasterKeyBytes);

void PutU32(uint8_t* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetU32(const uint8_t* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(in[i]) << (8 * i);
  return v;
}

void Checksum(const uint8_t* data, uint8_t (&out)[kChecksumBytes]) {
  crypto_generichash(out, kChecksumBytes, data, kChecksummedBytes, nullptr, 0);
}

}  // namespace

Status EnsureSodium() {
  if (sodium_init() < 0) return Internal("libsodium failed to initialise (sodium_init)");
  return Status::Ok();
}

KeyMaterial KeyMaterial::FromMasterKey(const uint8_t (&master)[kMasterKeyBytes]) {
  KeyMaterial km;
  crypto_kdf_derive_from_key(km.box_key_.data(), km.box_key_.size(), kBoxKeyId, kKdfContext,
                             master);
  crypto_kdf_derive_from_key(km.auth_key_.data(), km.auth_key_.size(), kAuthKeyId, kKdfContext,
                             master);
  crypto_kdf_derive_from_key(km.key_id_.data(), km.key_id_.size(), kPublicKeyIdId, kKdfContext,
                             master);
  return km;
}

KeyMaterial::KeyMaterial(KeyMaterial&& other) noexcept
    : box_key_(other.box_key_), auth_key_(other.auth_key_), key_id_(other.key_id_) {
  other.Wipe();
}

KeyMaterial& KeyMaterial::operator=(KeyMaterial&& other) noexcept {
  if (this != &other) {
    box_key_ = other.box_key_;
    auth_key_ = other.auth_key_;
    key_id_ = other.key_id_;
    other.Wipe();
  }
  return *this;
}

KeyMaterial::~KeyMaterial() { Wipe(); }

void KeyMaterial::Wipe() {
  sodium_memzero(box_key_.data(), box_key_.size());
  sodium_memzero(auth_key_.data(), auth_key_.size());
}

std::string KeyMaterial::KeyIdHex() const {
  char hex[kKeyIdBytes * 2 + 1];
  sodium_bin2hex(hex, sizeof(hex), key_id_.data(), key_id_.size());
  return hex;
}

Result<KeyMaterial> LoadKeyFile(Env* env, const std::string& path) {
  AIR_RETURN_IF_ERROR(EnsureSodium());
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) return ErrnoStatus("key file " + path, errno);
  if ((sb.st_mode & 077) != 0) {
    return PermissionDenied(fmt::format(
        "key file {} has mode {:04o}; it must be readable by its owner only (0600): run "
        "chmod 600 {}",
        path, sb.st_mode & 0777, path));
  }
  AIR_ASSIGN_OR_RETURN(std::string bytes, env->ReadFile(path));
  auto wipe = [&bytes] { sodium_memzero(bytes.data(), bytes.size()); };
  if (bytes.size() != kKeyFileBytes) {
    size_t size = bytes.size();
    wipe();
    return DataLoss(fmt::format(
        "key file {} is {} bytes; a valid key file is exactly {} bytes (it was truncated or "
        "overwritten): restore it from a backup, or remove the secrets directory to start over "
        "(every stored secret is lost)",
        path, size, kKeyFileBytes));
  }
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  if (std::memcmp(data, kKeyMagic, sizeof(kKeyMagic)) != 0) {
    wipe();
    return DataLoss(
        fmt::format("key file {} does not start with the magic bytes 'AIRK': it is "
                    "not an air key file or it was damaged",
                    path));
  }
  uint32_t version = GetU32(data + 4);
  if (version != kKeyFileVersion) {
    wipe();
    return DataLoss(fmt::format("key file {} has format version {}; this air reads version {}",
                                path, version, kKeyFileVersion));
  }
  uint8_t expected[kChecksumBytes];
  Checksum(data, expected);
  if (sodium_memcmp(expected, data + kChecksummedBytes, kChecksumBytes) != 0) {
    wipe();
    return DataLoss(fmt::format(
        "key file {} fails its checksum: the key bytes were modified or damaged; restore the "
        "key file from a backup (the store cannot be decrypted with a damaged key)",
        path));
  }
  uint8_t master[kMasterKeyBytes];
  std::memcpy(master, data + 8, kMasterKeyBytes);
  wipe();
  KeyMaterial km = KeyMaterial::FromMasterKey(master);
  sodium_memzero(master, sizeof(master));
  return km;
}

Result<KeyMaterial> CreateKeyFile(Env* env, const std::string& path) {
  AIR_RETURN_IF_ERROR(EnsureSodium());
  uint8_t file[kKeyFileBytes];
  std::memcpy(file, kKeyMagic, sizeof(kKeyMagic));
  PutU32(file + 4, kKeyFileVersion);
  randombytes_buf(file + 8, kMasterKeyBytes);
  uint8_t checksum[kChecksumBytes];
  Checksum(file, checksum);
  std::memcpy(file + kChecksummedBytes, checksum, kChecksumBytes);
  Status written = env->WriteFileAtomic(
      path, std::string_view(reinterpret_cast<const char*>(file), sizeof(file)), 0600);
  uint8_t master[kMasterKeyBytes];
  std::memcpy(master, file + 8, kMasterKeyBytes);
  sodium_memzero(file, sizeof(file));
  if (!written.ok()) {
    sodium_memzero(master, sizeof(master));
    return written.WithContext("create key file");
  }
  KeyMaterial km = KeyMaterial::FromMasterKey(master);
  sodium_memzero(master, sizeof(master));
  return km;
}

}  // namespace air::secrets
