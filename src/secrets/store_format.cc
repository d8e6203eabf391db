// Encoding, decoding and authentication of the secret store file; sealing of values.
#include "secrets/store_format.h"

#include <fmt/format.h>
#include <sodium.h>

#include <algorithm>
#include <cstring>

#include "base/strings.h"
#include "secrets/names.h"

namespace air::secrets {
namespace {

constexpr char kStoreMagic[8] = {'A', 'I', 'R', 'S', 'E', 'C', 'R', 'S'};
constexpr size_t kHeaderBytes = sizeof(kStoreMagic) + 4 + kKeyIdBytes + 4;
constexpr size_t kMinStoreBytes = kHeaderBytes + kTagBytes;
// "scope/key\0" prefix of every plaintext, at most 128 + 1 + 128 + 1 bytes.
constexpr size_t kMaxBoxBytes = crypto_secretbox_MACBYTES + 2 * kMaxNameLength + 2 + kMaxValueBytes;

static_assert(crypto_secretbox_NONCEBYTES == kNonceBytes);
static_assert(crypto_auth_BYTES == kTagBytes);

std::string BoundPrefix(std::string_view scope, std::string_view key) {
  std::string prefix = SecretPath(scope, key);
  prefix.push_back('\0');
  return prefix;
}

class Writer {
 public:
  void Bytes(const void* data, size_t n) { out_.append(static_cast<const char*>(data), n); }
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void I64(int64_t v) {
    auto u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(u >> (8 * i)));
  }
  void Name(const std::string& s) {
    U8(static_cast<uint8_t>(s.size()));
    Bytes(s.data(), s.size());
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

// Bounds-checked reader over the authenticated body; every failure names the file, the byte
// offset and what was being read.
class Reader {
 public:
  // Reads `data` (a prefix of the file) from byte `start`; offsets in messages are file offsets.
  Reader(std::string_view data, const std::string& path, size_t start)
      : data_(data), path_(path), pos_(start) {}

  size_t offset() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }

  Status Need(size_t n, const std::string& what) {
    if (remaining() >= n) return Status::Ok();
    return DataLoss(fmt::format(
        "secret store {} is truncated or damaged: {} needs {} bytes at offset {} but only {} "
        "remain before the authentication tag; restore the file from a backup",
        path_, what, n, pos_, remaining()));
  }
  Result<uint8_t> U8(const std::string& what) {
    AIR_RETURN_IF_ERROR(Need(1, what));
    return static_cast<uint8_t>(data_[pos_++]);
  }
  Result<uint32_t> U32(const std::string& what) {
    AIR_RETURN_IF_ERROR(Need(4, what));
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= static_cast<uint32_t>(static_cast<uint8_t>(data_[pos_++])) << (8 * i);
    return v;
  }
  Result<int64_t> I64(const std::string& what) {
    AIR_RETURN_IF_ERROR(Need(8, what));
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_++])) << (8 * i);
    return static_cast<int64_t>(v);
  }
  Result<std::string_view> Bytes(size_t n, const std::string& what) {
    AIR_RETURN_IF_ERROR(Need(n, what));
    std::string_view out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  // A length-prefixed scope or key name, checked against the naming rules.
  Result<std::string> Name(const std::string& what) {
    size_t at = pos_;
    AIR_ASSIGN_OR_RETURN(uint8_t len, U8(what + " length"));
    AIR_ASSIGN_OR_RETURN(std::string_view name, Bytes(len, what));
    Status valid = ValidateName(what, name);
    if (!valid.ok()) {
      return DataLoss(fmt::format("secret store {} is damaged: {} at offset {}: {}", path_, what,
                                  at, valid.message()));
    }
    return std::string(name);
  }

 private:
  std::string_view data_;
  const std::string& path_;
  size_t pos_;
};

Result<SealedSecret> ReadSecret(Reader& r, const ScopeRecord& scope, uint32_t index,
                                const std::string& path) {
  std::string where = fmt::format("secret #{} of scope '{}'", index + 1, scope.name);
  SealedSecret s;
  AIR_ASSIGN_OR_RETURN(s.key, r.Name(where + " key name"));
  where = fmt::format("secret {}", SecretPath(scope.name, s.key));
  AIR_ASSIGN_OR_RETURN(s.updated_us, r.I64(where + " update time"));
  AIR_ASSIGN_OR_RETURN(std::string_view nonce, r.Bytes(kNonceBytes, where + " nonce"));
  std::memcpy(s.nonce.data(), nonce.data(), kNonceBytes);
  size_t len_at = r.offset();
  AIR_ASSIGN_OR_RETURN(uint32_t box_len, r.U32(where + " ciphertext length"));
  size_t min_box = crypto_secretbox_MACBYTES + BoundPrefix(scope.name, s.key).size() + 1;
  if (box_len < min_box || box_len > kMaxBoxBytes) {
    return DataLoss(fmt::format(
        "secret store {} is damaged: {} has ciphertext length {} at offset {}; valid lengths "
        "are {} to {} bytes",
        path, where, box_len, len_at, min_box, kMaxBoxBytes));
  }
  AIR_ASSIGN_OR_RETURN(std::string_view box, r.Bytes(box_len, where + " ciphertext"));
  s.box = std::string(box);
  return s;
}

// Structure of the body (everything between the header fields already read and the tag).
Result<StoreContents> ReadBody(Reader& r, const std::string& path) {
  StoreContents contents;
  AIR_ASSIGN_OR_RETURN(uint32_t scope_count, r.U32("the scope count"));
  for (uint32_t i = 0; i < scope_count; ++i) {
    ScopeRecord scope;
    AIR_ASSIGN_OR_RETURN(scope.name, r.Name(fmt::format("scope #{} name", i + 1)));
    AIR_ASSIGN_OR_RETURN(scope.created_us, r.I64("scope '" + scope.name + "' creation time"));
    AIR_ASSIGN_OR_RETURN(uint32_t secret_count, r.U32("scope '" + scope.name + "' secret count"));
    if (!contents.scopes.empty() && contents.scopes.back().name >= scope.name) {
      return DataLoss(
          fmt::format("secret store {} is damaged: scope '{}' is out of order or "
                      "repeated",
                      path, scope.name));
    }
    for (uint32_t j = 0; j < secret_count; ++j) {
      AIR_ASSIGN_OR_RETURN(SealedSecret s, ReadSecret(r, scope, j, path));
      if (!scope.secrets.empty() && scope.secrets.back().key >= s.key) {
        return DataLoss(
            fmt::format("secret store {} is damaged: key {} is out of order or "
                        "repeated",
                        path, SecretPath(scope.name, s.key)));
      }
      scope.secrets.push_back(std::move(s));
    }
    contents.scopes.push_back(std::move(scope));
  }
  if (r.remaining() != 0) {
    return DataLoss(
        fmt::format("secret store {} is damaged: {} unexpected bytes after the last "
                    "entry (offset {})",
                    path, r.remaining(), r.offset()));
  }
  return contents;
}

}  // namespace

ScopeRecord* StoreContents::FindScope(std::string_view name) {
  for (auto& s : scopes) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const ScopeRecord* StoreContents::FindScope(std::string_view name) const {
  for (const auto& s : scopes) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const SealedSecret* FindSecret(const ScopeRecord& scope, std::string_view key) {
  for (const auto& s : scope.secrets) {
    if (s.key == key) return &s;
  }
  return nullptr;
}

SealedSecret SealValue(const KeyMaterial& keys, std::string_view scope, std::string_view key,
                       std::string_view value, int64_t updated_us) {
  SealedSecret sealed;
  sealed.key = std::string(key);
  sealed.updated_us = updated_us;
  randombytes_buf(sealed.nonce.data(), sealed.nonce.size());
  std::string plain = BoundPrefix(scope, key);
  plain.append(value);
  sealed.box.resize(plain.size() + crypto_secretbox_MACBYTES);
  crypto_secretbox_easy(reinterpret_cast<unsigned char*>(sealed.box.data()),
                        reinterpret_cast<const unsigned char*>(plain.data()), plain.size(),
                        sealed.nonce.data(), keys.box_key());
  sodium_memzero(plain.data(), plain.size());
  return sealed;
}

Result<std::string> OpenValue(const KeyMaterial& keys, std::string_view scope,
                              const SealedSecret& sealed, const std::string& path) {
  std::string path_name = SecretPath(scope, sealed.key);
  if (sealed.box.size() < crypto_secretbox_MACBYTES) {
    return DataLoss(
        fmt::format("secret store {}: the ciphertext of {} is too short", path, path_name));
  }
  std::string plain(sealed.box.size() - crypto_secretbox_MACBYTES, '\0');
  if (crypto_secretbox_open_easy(reinterpret_cast<unsigned char*>(plain.data()),
                                 reinterpret_cast<const unsigned char*>(sealed.box.data()),
                                 sealed.box.size(), sealed.nonce.data(), keys.box_key()) != 0) {
    return DataLoss(fmt::format(
        "secret store {}: the value of {} fails authentication (the ciphertext or its nonce "
        "was modified); put the secret again or restore the file from a backup",
        path, path_name));
  }
  std::string prefix = BoundPrefix(scope, sealed.key);
  if (plain.size() < prefix.size() || plain.compare(0, prefix.size(), prefix) != 0) {
    sodium_memzero(plain.data(), plain.size());
    return DataLoss(fmt::format(
        "secret store {}: the value stored under {} was sealed for another entry (moved within "
        "the file); put the secret again",
        path, path_name));
  }
  std::string value = plain.substr(prefix.size());
  sodium_memzero(plain.data(), plain.size());
  return value;
}

std::string SerializeStore(const StoreContents& contents, const KeyMaterial& keys) {
  Writer w;
  w.Bytes(kStoreMagic, sizeof(kStoreMagic));
  w.U32(kStoreFormatVersion);
  w.Bytes(keys.key_id().data(), kKeyIdBytes);
  w.U32(static_cast<uint32_t>(contents.scopes.size()));
  for (const auto& scope : contents.scopes) {
    w.Name(scope.name);
    w.I64(scope.created_us);
    w.U32(static_cast<uint32_t>(scope.secrets.size()));
    for (const auto& s : scope.secrets) {
      w.Name(s.key);
      w.I64(s.updated_us);
      w.Bytes(s.nonce.data(), s.nonce.size());
      w.U32(static_cast<uint32_t>(s.box.size()));
      w.Bytes(s.box.data(), s.box.size());
    }
  }
  unsigned char tag[kTagBytes];
  crypto_auth(tag, reinterpret_cast<const unsigned char*>(w.out().data()), w.out().size(),
              keys.auth_key());
  w.Bytes(tag, sizeof(tag));
  return std::move(w.out());
}

Result<StoreContents> ParseStore(std::string_view bytes, const KeyMaterial& keys,
                                 const std::string& path) {
  if (bytes.size() >= sizeof(kStoreMagic) &&
      std::memcmp(bytes.data(), kStoreMagic, sizeof(kStoreMagic)) != 0) {
    return DataLoss(
        fmt::format("secret store {} does not start with the magic bytes 'AIRSECRS': "
                    "it is not an air secret store or its header was damaged",
                    path));
  }
  if (bytes.size() < kMinStoreBytes) {
    return DataLoss(
        fmt::format("secret store {} is truncated: it is {} bytes, and a store is at "
                    "least {} bytes; restore it from a backup",
                    path, bytes.size(), kMinStoreBytes));
  }
  uint32_t version = 0;
  for (int i = 0; i < 4; ++i) {
    version |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
  }
  if (version != kStoreFormatVersion) {
    return DataLoss(
        fmt::format("secret store {} has format version {}; this air reads version {} "
                    "(a newer air wrote it, or the header was damaged)",
                    path, version, kStoreFormatVersion));
  }
  std::string_view key_id = bytes.substr(12, kKeyIdBytes);
  if (std::memcmp(key_id.data(), keys.key_id().data(), kKeyIdBytes) != 0) {
    char hex[kKeyIdBytes * 2 + 1];
    sodium_bin2hex(hex, sizeof(hex), reinterpret_cast<const unsigned char*>(key_id.data()),
                   kKeyIdBytes);
    return DataLoss(fmt::format(
        "secret store {} was written under key id {}, but the key file holds key id {}: the key "
        "file was replaced or the store header was damaged; restore the matching key file",
        path, hex, keys.KeyIdHex()));
  }
  std::string_view body = bytes.substr(0, bytes.size() - kTagBytes);
  Reader reader(body, path, kHeaderBytes - 4);
  AIR_ASSIGN_OR_RETURN(StoreContents contents, ReadBody(reader, path));
  const auto* tag = reinterpret_cast<const unsigned char*>(bytes.data() + body.size());
  if (crypto_auth_verify(tag, reinterpret_cast<const unsigned char*>(body.data()), body.size(),
                         keys.auth_key()) != 0) {
    // Name the entries whose own ciphertext no longer opens, to say what was damaged.
    std::vector<std::string> damaged;
    for (const auto& scope : contents.scopes) {
      for (const auto& s : scope.secrets) {
        if (!OpenValue(keys, scope.name, s, path).ok()) {
          damaged.push_back(SecretPath(scope.name, s.key));
        }
      }
    }
    std::string detail = damaged.empty()
                             ? "every value still decrypts, so names, times or the tag were changed"
                             : "values that no longer decrypt: " + Join(damaged, ", ");
    return DataLoss(fmt::format(
        "secret store {} fails its integrity check (authentication tag mismatch): the file was "
        "modified or damaged ({}); restore it from a backup",
        path, detail));
  }
  return contents;
}

}  // namespace air::secrets
