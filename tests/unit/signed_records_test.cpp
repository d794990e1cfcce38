// Records only the head may write, signed (store/signed_records.h, issue 33).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "store/signed_records.h"
#include "test_dirs.h"

namespace elastrain {
namespace {
using ::testing::HasSubstr;

struct Keys {
  ScopedTempDir dir{"signed_records"};
  std::shared_ptr<SigningKey> head;
  std::shared_ptr<VerifyKey> pub;
  Keys() {
    auto k = SigningKey::LoadOrCreate(dir.path() + "/head.key");
    EXPECT_TRUE(k.ok()) << k.status().message();
    head = *k;
    auto p = VerifyKey::Load(dir.path() + "/head.key.pub");
    EXPECT_TRUE(p.ok()) << p.status().message();
    pub = *p;
  }
};

TEST(SignedRecords, TheKeyIsCreatedPrivateAndReloaded) {
  Keys k;
  struct stat st {};
  ASSERT_EQ(stat((k.dir.path() + "/head.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = SigningKey::LoadOrCreate(k.dir.path() + "/head.key");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->public_key_pem(), k.head->public_key_pem()) << "the same key, not a new one";
  // Readable by others: refused, naming the file and the mode.
  ASSERT_EQ(chmod((k.dir.path() + "/head.key").c_str(), 0644), 0);
  auto open = SigningKey::LoadOrCreate(k.dir.path() + "/head.key");
  ASSERT_FALSE(open.ok());
  EXPECT_THAT(open.status().message(), HasSubstr("644"));
}

TEST(SignedRecords, ItsMissingDirectoryIsMadePrivate) {
  ScopedTempDir dir("signed_records_dir");
  ASSERT_TRUE(SigningKey::LoadOrCreate(dir.path() + "/.elastrain/head_signing_key").ok());
  struct stat st {};
  ASSERT_EQ(stat((dir.path() + "/.elastrain").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(SignedRecords, NotAKeyIsAClearError) {
  ScopedTempDir dir("signed_records_bad");
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/k", "hello").ok());
  ASSERT_EQ(chmod((dir.path() + "/k").c_str(), 0600), 0);
  auto k = SigningKey::LoadOrCreate(dir.path() + "/k");
  ASSERT_FALSE(k.ok());
  EXPECT_THAT(k.status().message(), HasSubstr("not a PEM Ed25519 private key"));
  auto p = VerifyKey::Load(dir.path() + "/k");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("not a PEM Ed25519 public key"));
  EXPECT_EQ(VerifyKey::Load(dir.path() + "/missing").status().code(), StatusCode::kNotFound);
  // A link planted where the key goes is not followed (nor replaced by a new key).
  ASSERT_EQ(symlink((dir.path() + "/k").c_str(), (dir.path() + "/link").c_str()), 0);
  auto linked = SigningKey::LoadOrCreate(dir.path() + "/link");
  ASSERT_FALSE(linked.ok());
  EXPECT_THAT(linked.status().message(), HasSubstr(dir.path() + "/link"));
  EXPECT_FALSE(VerifyKey::Load(dir.path() + "/link").ok());
  // A huge file is refused before it is read whole.
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/huge", std::string(1 << 20, 'A')).ok());
  auto huge = VerifyKey::Load(dir.path() + "/huge");
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(), HasSubstr("over"));
  // A truncated key: the first half of a real one.
  ScopedTempDir good("signed_records_trunc");
  ASSERT_TRUE(SigningKey::LoadOrCreate(good.path() + "/k").ok());
  auto pem = ReadFile(good.path() + "/k.pub");
  ASSERT_TRUE(pem.ok());
  EXPECT_FALSE(VerifyKey::FromPem(pem->substr(0, pem->size() / 2), "half").ok());
}

TEST(SignedRecords, ASignedRecordVerifiesAndAnyChangeBreaksIt) {
  Keys k;
  const std::string spec = R"({"config_yaml":"launch_program: /bin/true\n","job_id":"j1","run_dir":"/r"})";
  auto v = SignRecord(*k.head, "elastrain/job/spec", spec, 1000.5);
  ASSERT_TRUE(v.ok());
  auto at = VerifyRecord(*k.pub, "elastrain/job/spec", *v);
  ASSERT_TRUE(at.ok()) << at.status().message();
  EXPECT_DOUBLE_EQ(*at, 1000.5);
  // Unsigned: what a holder of the etcd role alone can write.
  EXPECT_THAT(VerifyRecord(*k.pub, "elastrain/job/spec", spec).status().message(), HasSubstr("unsigned"));
  // Altered: the program changed, the signature kept.
  nlohmann::json j = nlohmann::json::parse(*v);
  j["config_yaml"] = "launch_program: /tmp/evil\n";
  EXPECT_THAT(VerifyRecord(*k.pub, "elastrain/job/spec", j.dump()).status().message(), HasSubstr("not the head's"));
  // A field added.
  j = nlohmann::json::parse(*v);
  j["extra"] = 1;
  EXPECT_FALSE(VerifyRecord(*k.pub, "elastrain/job/spec", j.dump()).ok());
  // Moved to another key (a command for agent a1 put under agent a2's prefix).
  EXPECT_FALSE(VerifyRecord(*k.pub, "elastrain/job/plan", *v).ok());
  // Its time changed (to pass for newer).
  j = nlohmann::json::parse(*v);
  j["signature"]["at"] = 2000.5;
  EXPECT_FALSE(VerifyRecord(*k.pub, "elastrain/job/spec", j.dump()).ok());
  // Signed by another key (another head's, or the attacker's own).
  ScopedTempDir other("signed_records_other");
  auto mine = SigningKey::LoadOrCreate(other.path() + "/k");
  ASSERT_TRUE(mine.ok());
  auto forged = SignRecord(**mine, "elastrain/job/spec", spec, 1000.5);
  ASSERT_TRUE(forged.ok());
  EXPECT_FALSE(VerifyRecord(*k.pub, "elastrain/job/spec", *forged).ok());
}

TEST(SignedRecords, HostileSignaturesAreRefusedNotCrashed) {
  Keys k;
  for (const char* bad :
       {"", "null", "[]", "{\"signature\":1}", "{\"signature\":{\"by\":\"ed25519\",\"at\":\"x\",\"sig\":\"00\"}}",
        "{\"signature\":{\"by\":\"rsa\",\"at\":1,\"sig\":\"00\"}}", "{\"signature\":{\"by\":\"ed25519\",\"at\":1,\"sig\":\"zz\"}}",
        "{\"signature\":{\"by\":\"ed25519\",\"at\":1e308,\"sig\":\"00\"}}"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(VerifyRecord(*k.pub, "elastrain/job/spec", bad).ok());
  }
}

TEST(SignedRecords, AReaderRefusesAnOlderRecordAndARepeatedCommand) {
  Keys k;
  SignedReader reader(k.pub, "agent a1");
  const std::string key = "elastrain/job/plan";
  auto g1 = SignRecord(*k.head, key, R"({"generation":1})", 10);
  auto g2 = SignRecord(*k.head, key, R"({"generation":2})", 20);
  ASSERT_TRUE(g1.ok() && g2.ok());
  EXPECT_TRUE(reader.Accept(key, *g1));
  EXPECT_TRUE(reader.Accept(key, *g2));
  EXPECT_TRUE(reader.Accept(key, *g2)) << "the same record, read again";
  EXPECT_FALSE(reader.Accept(key, *g1)) << "rolled back: a replay";
  const std::string cmd_key = "elastrain/commands/a1/00000001";
  auto cmd = SignRecord(*k.head, cmd_key, R"({"action":"hung","worker":"a1-w0"})", 30);
  ASSERT_TRUE(cmd.ok());
  EXPECT_TRUE(reader.Accept(cmd_key, *cmd, /*once_only=*/true));
  EXPECT_FALSE(reader.Accept(cmd_key, *cmd, /*once_only=*/true)) << "a command runs once";
}

TEST(SignedRecords, TheSigningStoreSignsOnlyTheKeysItIsGiven) {
  Keys k;
  std::shared_ptr<Store> inner = OpenStore("memory://").value();
  auto store = MakeSigningStore(inner, k.head, [](const std::string& key) { return key.rfind("elastrain/job/", 0) == 0; });
  ASSERT_TRUE(store->Put("elastrain/job/spec", R"({"job_id":"j"})").ok());
  ASSERT_TRUE(store->CompareAndSwap("elastrain/job/plan", 0, R"({"generation":0})").value());
  ASSERT_TRUE(store->Put("elastrain/agents/a1", R"({"id":"a1"})").ok());
  SignedReader reader(k.pub, "test");
  EXPECT_TRUE(reader.Accept("elastrain/job/spec", inner->Get("elastrain/job/spec").value()->value));
  EXPECT_TRUE(reader.Accept("elastrain/job/plan", inner->Get("elastrain/job/plan").value()->value));
  EXPECT_EQ(inner->Get("elastrain/agents/a1").value()->value, R"({"id":"a1"})");
  // Two writes in one clock tick are still ordered.
  ASSERT_TRUE(store->Put("elastrain/job/spec", R"({"job_id":"j2"})").ok());
  EXPECT_TRUE(reader.Accept("elastrain/job/spec", inner->Get("elastrain/job/spec").value()->value));
}

}  // namespace
}  // namespace elastrain
