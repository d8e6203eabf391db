// SecretStore: scopes of named secret values, encrypted at rest under AIR_HOME/secrets
// (docs/secrets.md). Layout: secrets/ (0700) holding key (0600, the master key file), store
// (0600, the encrypted store, format in store_format.h), lock (0600, flock target) and
// .gitignore ("*": keeps the directory out of code snapshots and git when AIR_HOME is inside
// a project).
//
// Every operation is one locked cycle on disk: writers take an exclusive flock on `lock`, read
// the store, change it, and replace it atomically (temp file created 0600, fsync, rename, fsync
// of the directory), so concurrent writers in any number of processes never lose an update and
// readers (shared lock) never see a torn file. Nothing is cached between calls: the object holds
// only paths and the Env, so it is safe to use from several threads. Reads of a home without a
// store create nothing; the key file is created by the first successful write.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "secrets/key_material.h"
#include "secrets/store_format.h"

namespace air::secrets {

struct ScopeInfo {
  std::string name;
  int64_t created_us = 0;
  size_t secret_count = 0;
};

struct SecretInfo {
  std::string key;
  int64_t updated_us = 0;
};

struct PutOutcome {
  bool replaced = false;  // an older value existed and was overwritten
  int64_t updated_us = 0;
  size_t bytes = 0;
};

// A consistent, immutable read of the whole store. Values stay encrypted until Reveal().
class StoreSnapshot {
 public:
  StoreSnapshot(StoreContents contents, std::shared_ptr<const KeyMaterial> keys, std::string path)
      : contents_(std::move(contents)), keys_(std::move(keys)), path_(std::move(path)) {}

  const StoreContents& contents() const { return contents_; }
  bool HasScope(std::string_view scope) const;
  bool HasSecret(std::string_view scope, std::string_view key) const;
  // The decrypted value; NotFound naming scope/key (with a did-you-mean) when absent.
  Result<std::string> Reveal(std::string_view scope, std::string_view key) const;
  // NotFound for a missing scope, with how to create it and the closest existing name.
  Status CheckScopeExists(std::string_view scope) const;

 private:
  StoreContents contents_;
  std::shared_ptr<const KeyMaterial> keys_;  // null when no store file exists yet
  std::string path_;
};

class SecretStore {
 public:
  // `air_home` is the AIR_HOME directory; the store lives in air_home/secrets.
  SecretStore(Env* env, std::string air_home);

  const std::string& dir() const { return dir_; }
  const std::string& key_path() const { return key_path_; }
  const std::string& store_path() const { return store_path_; }
  const std::string& lock_path() const { return lock_path_; }

  // AlreadyExists if the scope exists.
  Status CreateScope(std::string_view scope);
  // Removes the scope and every secret in it; NotFound if it does not exist.
  Status DeleteScope(std::string_view scope);
  // Creates or replaces scope/key; the scope must exist. `value` is checked by ValidateValue.
  Result<PutOutcome> PutSecret(std::string_view scope, std::string_view key,
                               std::string_view value);
  // NotFound if the scope or the key does not exist.
  Status DeleteSecret(std::string_view scope, std::string_view key);

  Result<std::vector<ScopeInfo>> ListScopes();
  Result<std::vector<SecretInfo>> ListSecrets(std::string_view scope);
  Result<StoreSnapshot> Read();
  Result<std::string> GetSecret(std::string_view scope, std::string_view key);

 private:
  struct Loaded {
    StoreContents contents;
    std::shared_ptr<const KeyMaterial> keys;  // null when neither key nor store exist
  };

  Status PrepareDirectory();
  // Writes secrets/.gitignore ("*") if it is missing.
  Status EnsureIgnoreFile();
  // Reads key and store; the caller holds the lock.
  Result<Loaded> LoadLocked();
  // Runs `change` on the contents under the exclusive lock and writes the result back.
  template <typename Change>
  Status Mutate(Change&& change);

  Env* env_;
  std::string air_home_;
  std::string dir_;
  std::string key_path_;
  std::string store_path_;
  std::string lock_path_;
  std::string ignore_path_;
};

}  // namespace air::secrets
