// Tamper and truncation tests: every damaged key or store file gives a clear error naming the
// file (DataLoss or PermissionDenied), never a wrong value or a crash.
#include <gtest/gtest.h>
#include <sodium.h>
#include <sys/stat.h>

#include "secrets/secret_store.h"
#include "secrets/store_format.h"
#include "test_util.h"

namespace air::secrets {
namespace {

using testing::OverwriteInPlace;
using testing::ReadBytes;
using testing::TempHome;

class TamperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(store_.CreateScope("my_scope").ok());
    ASSERT_TRUE(store_.CreateScope("other").ok());
    ASSERT_TRUE(store_.PutSecret("my_scope", "hf_token", "hf_CANARYvalue123").ok());
    ASSERT_TRUE(store_.PutSecret("my_scope", "second", "another value").ok());
    ASSERT_TRUE(store_.PutSecret("other", "x", "x-value").ok());
    store_bytes_ = ReadBytes(store_.store_path());
    key_bytes_ = ReadBytes(store_.key_path());
  }

  // Every way of reading the store fails with `code` and a message naming `file`.
  void ExpectEveryReadFails(ErrorCode code, const std::string& file, const std::string& needle) {
    auto get = store_.GetSecret("my_scope", "hf_token");
    ASSERT_FALSE(get.ok()) << "a damaged file still returned a value";
    EXPECT_EQ(get.status().code(), code) << get.status().ToString();
    EXPECT_NE(get.status().message().find(file), std::string::npos) << get.status().message();
    EXPECT_NE(get.status().message().find(needle), std::string::npos) << get.status().message();
    EXPECT_EQ(get.status().message().find("CANARY"), std::string::npos);
    EXPECT_FALSE(store_.ListScopes().ok());
    EXPECT_FALSE(store_.PutSecret("other", "y", "y-value").ok());  // no write over damage
  }

  size_t OffsetOf(const std::string& needle) {
    size_t at = store_bytes_.find(needle);
    EXPECT_NE(at, std::string::npos);
    return at;
  }

  TempHome home_;
  SecretStore store_{DefaultEnv(), home_.path()};
  std::string store_bytes_;
  std::string key_bytes_;
};

TEST_F(TamperTest, FlippedCiphertextByteNamesTheDamagedEntry) {
  // The hf_token box is the last field of its entry, which is followed by "second".
  size_t next_entry = OffsetOf("second");
  std::string bytes = store_bytes_;
  bytes[next_entry - 2] ^= 0x01;
  OverwriteInPlace(store_.store_path(), bytes);
  ExpectEveryReadFails(ErrorCode::kDataLoss, store_.store_path(),
                       "values that no longer decrypt: my_scope/hf_token");
}

TEST_F(TamperTest, FlippedNameByteFailsTheIntegrityCheck) {
  std::string bytes = store_bytes_;
  bytes[OffsetOf("second")] = 't';  // "tecond": valid and still in order; only the tag can tell
  OverwriteInPlace(store_.store_path(), bytes);
  ExpectEveryReadFails(ErrorCode::kDataLoss, store_.store_path(), "integrity check");
}

TEST_F(TamperTest, DamagedHeaderFieldsAreNamed) {
  std::string bad_magic = store_bytes_;
  bad_magic[0] = 'X';
  OverwriteInPlace(store_.store_path(), bad_magic);
  ExpectEveryReadFails(ErrorCode::kDataLoss, store_.store_path(), "magic bytes 'AIRSECRS'");

  std::string bad_version = store_bytes_;
  bad_version[8] = 7;
  OverwriteInPlace(store_.store_path(), bad_version);
  ExpectEveryReadFails(ErrorCode::kDataLoss, store_.store_path(), "format version 7");

  std::string bad_key_id = store_bytes_;
  bad_key_id[12] ^= 0x80;
  OverwriteInPlace(store_.store_path(), bad_key_id);
  ExpectEveryReadFails(ErrorCode::kDataLoss, store_.store_path(), "key id");
}

TEST_F(TamperTest, EverySingleByteFlipIsDetected) {
  for (size_t i = 0; i < store_bytes_.size(); ++i) {
    std::string bytes = store_bytes_;
    bytes[i] ^= 0x20;
    OverwriteInPlace(store_.store_path(), bytes);
    auto get = store_.GetSecret("my_scope", "hf_token");
    ASSERT_FALSE(get.ok()) << "flip at offset " << i << " went unnoticed";
    EXPECT_EQ(get.status().code(), ErrorCode::kDataLoss) << i << ": " << get.status().ToString();
    EXPECT_NE(get.status().message().find(store_.store_path()), std::string::npos) << i;
  }
}

TEST_F(TamperTest, EveryTruncationAndAppendIsDetected) {
  for (size_t len = 0; len < store_bytes_.size(); ++len) {
    OverwriteInPlace(store_.store_path(), store_bytes_.substr(0, len));
    auto get = store_.GetSecret("my_scope", "hf_token");
    ASSERT_FALSE(get.ok()) << "truncation to " << len << " bytes went unnoticed";
    EXPECT_EQ(get.status().code(), ErrorCode::kDataLoss) << len;
    EXPECT_NE(get.status().message().find(store_.store_path()), std::string::npos) << len;
  }
  OverwriteInPlace(store_.store_path(), store_bytes_.substr(0, 10));
  EXPECT_NE(store_.GetSecret("my_scope", "hf_token").status().message().find("is truncated"),
            std::string::npos);
  OverwriteInPlace(store_.store_path(), store_bytes_ + "junk");
  EXPECT_EQ(store_.GetSecret("my_scope", "hf_token").status().code(), ErrorCode::kDataLoss);
  // The intact file still reads back.
  OverwriteInPlace(store_.store_path(), store_bytes_);
  EXPECT_EQ(*store_.GetSecret("my_scope", "hf_token"), "hf_CANARYvalue123");
}

TEST_F(TamperTest, DamagedKeyFileIsReportedAsSuch) {
  std::string flipped = key_bytes_;
  flipped[20] ^= 0x01;  // inside the 32 key bytes
  OverwriteInPlace(store_.key_path(), flipped);
  ExpectEveryReadFails(ErrorCode::kDataLoss, store_.key_path(), "fails its checksum");

  OverwriteInPlace(store_.key_path(), key_bytes_.substr(0, 30));
  ExpectEveryReadFails(ErrorCode::kDataLoss, store_.key_path(), "is 30 bytes");

  std::string bad_magic = key_bytes_;
  bad_magic[0] = 'Z';
  OverwriteInPlace(store_.key_path(), bad_magic);
  ExpectEveryReadFails(ErrorCode::kDataLoss, store_.key_path(), "magic bytes 'AIRK'");
}

TEST_F(TamperTest, AnotherValidKeyIsAKeyIdMismatch) {
  TempHome other_home;
  SecretStore other(DefaultEnv(), other_home.path());
  ASSERT_TRUE(other.CreateScope("s").ok());
  OverwriteInPlace(store_.key_path(), ReadBytes(other.key_path()));
  ExpectEveryReadFails(ErrorCode::kDataLoss, store_.store_path(), "the key file was replaced");
}

TEST_F(TamperTest, MissingKeyFileWithAStoreIsAClearError) {
  ASSERT_EQ(::unlink(store_.key_path().c_str()), 0);
  ExpectEveryReadFails(ErrorCode::kFailedPrecondition, store_.key_path(), "is missing");
  // Nothing silently creates a new key over the orphaned store.
  EXPECT_FALSE(DefaultEnv()->FileExists(store_.key_path()));
}

TEST_F(TamperTest, GroupReadableKeyFileIsRefused) {
  ASSERT_EQ(::chmod(store_.key_path().c_str(), 0640), 0);
  ExpectEveryReadFails(ErrorCode::kPermissionDenied, store_.key_path(), "chmod 600");
}

TEST_F(TamperTest, ABoxMovedToAnotherEntryDoesNotOpen) {
  auto snapshot = store_.Read();
  ASSERT_TRUE(snapshot.ok());
  auto keys = LoadKeyFile(DefaultEnv(), store_.key_path());
  ASSERT_TRUE(keys.ok());
  const ScopeRecord* scope = snapshot->contents().FindScope("my_scope");
  SealedSecret moved = *FindSecret(*scope, "hf_token");
  moved.key = "second";  // an attacker holding the key could re-tag the file, not the box
  auto opened = OpenValue(*keys, "my_scope", moved, store_.store_path());
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("sealed for another entry"), std::string::npos)
      << opened.status().message();
}

}  // namespace
}  // namespace air::secrets
