// SecretStore: locked read-modify-write cycles over the encrypted store file.
#include "secrets/secret_store.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>

#include "base/private_dir.h"
#include "base/strings.h"
#include "secrets/names.h"

namespace air::secrets {
namespace {

// AIR_HOME/secrets/.gitignore: code snapshots honour .gitignore files as git does, so when
// AIR_HOME lies inside a snapshot's root_path (or a git work tree) the key and the store stay
// out of it; a snapshot holding both would hold every value.
constexpr std::string_view kIgnoreEverything =
    "# air: the secret store and its key never go into a code snapshot or a commit\n*\n";

std::vector<std::string> ScopeNames(const StoreContents& contents) {
  std::vector<std::string> names;
  for (const auto& s : contents.scopes) names.push_back(s.name);
  return names;
}

Status ScopeNotFound(const StoreContents& contents, std::string_view scope) {
  return NotFound(
      fmt::format("secret scope '{}' does not exist{}; create it with: air secrets create-scope {}",
                  scope, DidYouMeanSuffix(scope, ScopeNames(contents)), scope));
}

Status SecretNotFound(const ScopeRecord& scope, std::string_view key) {
  std::vector<std::string> keys;
  for (const auto& s : scope.secrets) keys.push_back(s.key);
  std::string existing =
      keys.empty() ? "the scope holds no secrets" : "its keys are: " + Join(keys, ", ");
  return NotFound(fmt::format(
      "secret {} does not exist{} ({}); store it with: air secrets "
      "put-secret {} {}",
      SecretPath(scope.name, key), DidYouMeanSuffix(key, keys), existing, scope.name, key));
}

}  // namespace

bool StoreSnapshot::HasScope(std::string_view scope) const {
  return contents_.FindScope(scope) != nullptr;
}

bool StoreSnapshot::HasSecret(std::string_view scope, std::string_view key) const {
  const ScopeRecord* s = contents_.FindScope(scope);
  return s != nullptr && FindSecret(*s, key) != nullptr;
}

Status StoreSnapshot::CheckScopeExists(std::string_view scope) const {
  if (HasScope(scope)) return Status::Ok();
  return ScopeNotFound(contents_, scope);
}

Result<std::string> StoreSnapshot::Reveal(std::string_view scope, std::string_view key) const {
  const ScopeRecord* s = contents_.FindScope(scope);
  if (s == nullptr) return ScopeNotFound(contents_, scope);
  const SealedSecret* sealed = FindSecret(*s, key);
  if (sealed == nullptr) return SecretNotFound(*s, key);
  return OpenValue(*keys_, scope, *sealed, path_);
}

SecretStore::SecretStore(Env* env, std::string air_home)
    : env_(env),
      air_home_(std::move(air_home)),
      dir_(air_home_ + "/secrets"),
      key_path_(dir_ + "/key"),
      store_path_(dir_ + "/store"),
      lock_path_(dir_ + "/lock"),
      ignore_path_(dir_ + "/.gitignore") {}

Status SecretStore::PrepareDirectory() {
  AIR_RETURN_IF_ERROR(EnsureSodium());
  AIR_RETURN_IF_ERROR(MakePrivateDir(air_home_, env_, "AIR_HOME"));
  return MakePrivateDir(dir_, env_);
}

Status SecretStore::EnsureIgnoreFile() {
  if (env_->FileExists(ignore_path_)) return Status::Ok();
  return env_->WriteFileAtomic(ignore_path_, kIgnoreEverything, 0600);
}

Result<SecretStore::Loaded> SecretStore::LoadLocked() {
  Loaded loaded;
  bool have_store = env_->FileExists(store_path_);
  bool have_key = env_->FileExists(key_path_);
  if (!have_key) {
    if (have_store) {
      return FailedPrecondition(fmt::format(
          "the key file {} is missing, but the secret store {} exists and cannot be decrypted "
          "without it: restore the key file from a backup, or remove {} to start over (every "
          "stored secret is lost)",
          key_path_, store_path_, dir_));
    }
    return loaded;
  }
  AIR_ASSIGN_OR_RETURN(KeyMaterial keys, LoadKeyFile(env_, key_path_));
  loaded.keys = std::make_shared<const KeyMaterial>(std::move(keys));
  if (!have_store) return loaded;
  AIR_ASSIGN_OR_RETURN(std::string bytes, env_->ReadFile(store_path_));
  AIR_ASSIGN_OR_RETURN(loaded.contents, ParseStore(bytes, *loaded.keys, store_path_));
  return loaded;
}

template <typename Change>
Status SecretStore::Mutate(Change&& change) {
  AIR_RETURN_IF_ERROR(PrepareDirectory());
  AIR_ASSIGN_OR_RETURN(FileLock lock, env_->LockFile(lock_path_, FileLock::Mode::kExclusive));
  AIR_ASSIGN_OR_RETURN(Loaded loaded, LoadLocked());
  // `change` gets null keys only while nothing is stored yet; the key file is created after a
  // change succeeds, so a failing first command leaves no files but the lock.
  AIR_RETURN_IF_ERROR(change(loaded.contents, loaded.keys.get()));
  if (loaded.keys == nullptr) {
    AIR_ASSIGN_OR_RETURN(KeyMaterial created, CreateKeyFile(env_, key_path_));
    loaded.keys = std::make_shared<const KeyMaterial>(std::move(created));
  }
  AIR_RETURN_IF_ERROR(EnsureIgnoreFile());
  std::string bytes = SerializeStore(loaded.contents, *loaded.keys);
  return env_->WriteFileAtomic(store_path_, bytes, 0600);
}

Status SecretStore::CreateScope(std::string_view scope) {
  AIR_RETURN_IF_ERROR(ValidateName("scope", scope));
  int64_t now = env_->NowMicros();
  return Mutate([&](StoreContents& contents, const KeyMaterial*) -> Status {
    if (contents.FindScope(scope) != nullptr) {
      return AlreadyExists(fmt::format("secret scope '{}' already exists", scope));
    }
    ScopeRecord record;
    record.name = std::string(scope);
    record.created_us = now;
    auto at =
        std::lower_bound(contents.scopes.begin(), contents.scopes.end(), record.name,
                         [](const ScopeRecord& r, const std::string& n) { return r.name < n; });
    contents.scopes.insert(at, std::move(record));
    return Status::Ok();
  });
}

Status SecretStore::DeleteScope(std::string_view scope) {
  AIR_RETURN_IF_ERROR(ValidateName("scope", scope));
  return Mutate([&](StoreContents& contents, const KeyMaterial*) -> Status {
    auto it = std::find_if(contents.scopes.begin(), contents.scopes.end(),
                           [&](const ScopeRecord& r) { return r.name == scope; });
    if (it == contents.scopes.end()) return ScopeNotFound(contents, scope);
    contents.scopes.erase(it);
    return Status::Ok();
  });
}

Result<PutOutcome> SecretStore::PutSecret(std::string_view scope, std::string_view key,
                                          std::string_view value) {
  AIR_RETURN_IF_ERROR(ValidateName("scope", scope));
  AIR_RETURN_IF_ERROR(ValidateName("key", key));
  AIR_RETURN_IF_ERROR(ValidateValue(scope, key, value));
  PutOutcome outcome;
  outcome.updated_us = env_->NowMicros();
  outcome.bytes = value.size();
  AIR_RETURN_IF_ERROR(Mutate([&](StoreContents& contents, const KeyMaterial* keys) -> Status {
    ScopeRecord* record = contents.FindScope(scope);
    if (record == nullptr) return ScopeNotFound(contents, scope);
    if (keys == nullptr) return Internal("secret store: a scope exists but no key was loaded");
    SealedSecret sealed = SealValue(*keys, scope, key, value, outcome.updated_us);
    auto at =
        std::lower_bound(record->secrets.begin(), record->secrets.end(), sealed.key,
                         [](const SealedSecret& s, const std::string& k) { return s.key < k; });
    outcome.replaced = at != record->secrets.end() && at->key == key;
    if (outcome.replaced) {
      *at = std::move(sealed);
    } else {
      record->secrets.insert(at, std::move(sealed));
    }
    return Status::Ok();
  }));
  return outcome;
}

Status SecretStore::DeleteSecret(std::string_view scope, std::string_view key) {
  AIR_RETURN_IF_ERROR(ValidateName("scope", scope));
  AIR_RETURN_IF_ERROR(ValidateName("key", key));
  return Mutate([&](StoreContents& contents, const KeyMaterial*) -> Status {
    ScopeRecord* record = contents.FindScope(scope);
    if (record == nullptr) return ScopeNotFound(contents, scope);
    auto it = std::find_if(record->secrets.begin(), record->secrets.end(),
                           [&](const SealedSecret& s) { return s.key == key; });
    if (it == record->secrets.end()) return SecretNotFound(*record, key);
    record->secrets.erase(it);
    return Status::Ok();
  });
}

Result<StoreSnapshot> SecretStore::Read() {
  if (!env_->IsDirectory(dir_)) return StoreSnapshot({}, nullptr, store_path_);
  AIR_RETURN_IF_ERROR(EnsureSodium());
  AIR_ASSIGN_OR_RETURN(FileLock lock, env_->LockFile(lock_path_, FileLock::Mode::kShared));
  AIR_ASSIGN_OR_RETURN(Loaded loaded, LoadLocked());
  return StoreSnapshot(std::move(loaded.contents), std::move(loaded.keys), store_path_);
}

Result<std::vector<ScopeInfo>> SecretStore::ListScopes() {
  AIR_ASSIGN_OR_RETURN(StoreSnapshot snapshot, Read());
  std::vector<ScopeInfo> out;
  for (const auto& s : snapshot.contents().scopes) {
    out.push_back({s.name, s.created_us, s.secrets.size()});
  }
  return out;
}

Result<std::vector<SecretInfo>> SecretStore::ListSecrets(std::string_view scope) {
  AIR_RETURN_IF_ERROR(ValidateName("scope", scope));
  AIR_ASSIGN_OR_RETURN(StoreSnapshot snapshot, Read());
  AIR_RETURN_IF_ERROR(snapshot.CheckScopeExists(scope));
  std::vector<SecretInfo> out;
  for (const auto& s : snapshot.contents().FindScope(scope)->secrets) {
    out.push_back({s.key, s.updated_us});
  }
  return out;
}

Result<std::string> SecretStore::GetSecret(std::string_view scope, std::string_view key) {
  AIR_RETURN_IF_ERROR(ValidateName("scope", scope));
  AIR_RETURN_IF_ERROR(ValidateName("key", key));
  AIR_ASSIGN_OR_RETURN(StoreSnapshot snapshot, Read());
  return snapshot.Reveal(scope, key);
}

}  // namespace air::secrets
