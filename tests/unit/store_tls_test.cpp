// etcds:// without an etcd: the URL forms, the credentials' checks (which run before any
// connection), where the credentials come from (flag over ELASTRAIN_ETCD_*), and what an
// agent hands its workers. The TLS handshake, tokens and refusals by a real etcd are in
// tests/integration/test_cluster_tls.sh.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cli/store_args.h"
#include "store/store.h"
#include "test_dirs.h"
#include "wire/protocol.h"

namespace elastrain {
namespace {

TEST(StoreUrlTest, ParsesTheThreeForms) {
  auto m = ParseStoreUrl("memory://");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->kind, StoreAddress::Kind::kMemory);

  auto plain = ParseStoreUrl("etcd://10.0.0.1:2379");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->kind, StoreAddress::Kind::kEtcd);
  EXPECT_FALSE(plain->tls);
  EXPECT_EQ(plain->host, "10.0.0.1");
  EXPECT_EQ(plain->port, 2379);

  auto tls = ParseStoreUrl("etcds://etcd.example:2379/");
  ASSERT_TRUE(tls.ok()) << tls.status().message();
  EXPECT_TRUE(tls->tls);
  EXPECT_EQ(tls->host, "etcd.example");
  EXPECT_EQ(tls->port, 2379);

  auto v6 = ParseStoreUrl("etcds://[::1]:2379");
  ASSERT_TRUE(v6.ok()) << v6.status().message();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_TRUE(v6->tls);
}

TEST(StoreUrlTest, TheStoreUrlKeepsTheSchemeSoThePlanDoesToo) {
  // The controller writes store->url() into the plan's rendezvous address; the workers
  // open that URL, so an etcds:// store must say etcds://.
  StoreOptions opt;
  auto s = MakeEtcdStore("127.0.0.1", 2379, opt, /*tls=*/true);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)->url(), "etcds://127.0.0.1:2379");
  auto v6 = MakeEtcdStore("::1", 2379, opt, /*tls=*/false);
  ASSERT_TRUE(v6.ok()) << v6.status().message();
  EXPECT_EQ((*v6)->url(), "etcd://[::1]:2379");
}

// Credential files in a scratch directory, with the modes a test asks for.
class CredentialFiles : public testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text, mode_t mode) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }
  Status Make(const StoreOptions& opt, bool tls = true) {
    return MakeEtcdStore("127.0.0.1", 2379, opt, tls).status();
  }
  ScopedTempDir dir_{"store_tls"};
};

TEST_F(CredentialFiles, CredentialsAreRefusedOverPlainEtcd) {
  StoreOptions opt;
  opt.ca_file = Write("ca.crt", "x", 0644);
  const Status st = Make(opt, /*tls=*/false);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--store-ca or ELASTRAIN_ETCD_CA is set but the store is plain HTTP"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("use etcds://"), std::string::npos) << st.message();
}

TEST_F(CredentialFiles, CertAndKeyGoTogetherAndSoDoUserAndPassword) {
  StoreOptions cert_only;
  cert_only.cert_file = Write("c.crt", "x", 0644);
  EXPECT_NE(Make(cert_only).message().find("needs both --store-cert"), std::string::npos);
  StoreOptions user_only;
  user_only.user = "elastrain";
  EXPECT_NE(Make(user_only).message().find("needs both --store-user"), std::string::npos);
}

TEST_F(CredentialFiles, KeyAndPasswordFilesMustBePrivate) {
  StoreOptions opt;
  opt.user = "elastrain";
  opt.password_file = Write("pw", "secret\n", 0640);
  const Status st = Make(opt);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("is readable by group or others (mode 0640): expected a private file (chmod 600"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(st.message().find("secret"), std::string::npos) << "the password leaked into: " << st.message();

  StoreOptions key;
  key.cert_file = Write("c.crt", "x", 0644);
  key.key_file = Write("c.key", "x", 0604);
  EXPECT_NE(Make(key).message().find("--store-key or ELASTRAIN_ETCD_KEY"), std::string::npos);
}

TEST_F(CredentialFiles, MissingOrOddFilesAreNamed) {
  StoreOptions missing;
  missing.ca_file = dir_.path() + "/nope.crt";
  const Status st = Make(missing);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("etcds://127.0.0.1:2379: --store-ca or ELASTRAIN_ETCD_CA '" + missing.ca_file +
                              "': No such file or directory"),
            std::string::npos)
      << st.message();
  StoreOptions dir;
  dir.ca_file = dir_.path();
  EXPECT_NE(Make(dir).message().find("not a regular file"), std::string::npos);
  StoreOptions empty_password;
  empty_password.user = "elastrain";
  empty_password.password_file = Write("empty", "\n", 0600);
  EXPECT_NE(Make(empty_password).message().find("expected the password on its first line"), std::string::npos);
}

TEST_F(CredentialFiles, ABadCertificatePairFailsWhenTheStoreIsMade) {
  StoreOptions opt;
  opt.cert_file = Write("c.crt", "not a certificate", 0644);
  opt.key_file = Write("c.key", "not a key", 0600);
  const Status st = Make(opt);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("cannot load the client certificate"), std::string::npos) << st.message();
}

TEST_F(CredentialFiles, APrivatePasswordFileIsAccepted) {
  StoreOptions opt;
  opt.user = "elastrain";
  opt.password_file = Write("pw", "secret\r\nsecond line ignored\n", 0600);
  EXPECT_TRUE(Make(opt).ok());
}

// An environment in a map, as the getenv the functions take.
struct FakeEnv {
  std::map<std::string, std::string> vars;
  std::function<const char*(const char*)> Getenv() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

TEST(StoreCredentialsEnvTest, FillsOnlyWhatIsStillEmpty) {
  FakeEnv env{{{kEnvEtcdCa, "/env/ca.crt"}, {kEnvEtcdUser, "env-user"}, {kEnvEtcdPasswordFile, "/env/pw"}}};
  StoreOptions opt;
  opt.ca_file = "/flag/ca.crt";
  FillStoreCredentialsFromEnv(&opt, env.Getenv());
  EXPECT_EQ(opt.ca_file, "/flag/ca.crt");
  EXPECT_EQ(opt.user, "env-user");
  EXPECT_EQ(opt.password_file, "/env/pw");
  EXPECT_EQ(opt.cert_file, "");
}

TEST(StoreCredentialsEnvTest, ChildEnvironmentCarriesPathsAndTheUserOnly) {
  StoreOptions opt;
  opt.ca_file = "/c/ca.crt";
  opt.cert_file = "/c/etcd-client.crt";
  opt.key_file = "/c/etcd-client.key";
  opt.user = "elastrain";
  opt.password_file = "/c/pw";
  const std::map<std::string, std::string> want = {{kEnvEtcdCa, "/c/ca.crt"},
                                                   {kEnvEtcdCert, "/c/etcd-client.crt"},
                                                   {kEnvEtcdKey, "/c/etcd-client.key"},
                                                   {kEnvEtcdUser, "elastrain"},
                                                   {kEnvEtcdPasswordFile, "/c/pw"}};
  EXPECT_EQ(StoreCredentialsEnv(opt), want);
  EXPECT_TRUE(StoreCredentialsEnv(StoreOptions{}).empty());
  // What the agent hands its workers is what they read back.
  FakeEnv child{StoreCredentialsEnv(opt)};
  StoreOptions worker;
  FillStoreCredentialsFromEnv(&worker, child.Getenv());
  EXPECT_EQ(StoreCredentialsEnv(worker), want);
}

// AddStoreOptions on a CLI11 app with `args` (in order) and `env`.
StoreOptions ParseStoreFlags(std::vector<std::string> args, const FakeEnv& env) {
  CLI::App app;
  StoreOptions opt;
  AddStoreOptions(app, &opt, env.Getenv());
  std::reverse(args.begin(), args.end());  // CLI11 takes the vector in reverse order
  app.parse(args);
  return opt;
}

TEST(StoreArgsTest, AFlagWinsOverItsVariable) {
  const FakeEnv env{{{kEnvEtcdCa, "/env/ca.crt"}, {kEnvEtcdCert, "/env/c.crt"}, {kEnvEtcdKey, "/env/c.key"}}};
  const StoreOptions opt = ParseStoreFlags({"--store-ca", "/flag/ca.crt", "--store-user", "u"}, env);
  EXPECT_EQ(opt.ca_file, "/flag/ca.crt");  // flag over environment
  EXPECT_EQ(opt.cert_file, "/env/c.crt");  // environment where no flag
  EXPECT_EQ(opt.key_file, "/env/c.key");
  EXPECT_EQ(opt.user, "u");                // flag where no environment
  EXPECT_EQ(opt.password_file, "");
  EXPECT_EQ(opt.key_scope, keys::kRoot);
}

TEST(StoreArgsTest, NoFlagsNoEnvironmentNoCredentials) {
  const StoreOptions opt = ParseStoreFlags({}, FakeEnv{});
  EXPECT_TRUE(StoreCredentialsEnv(opt).empty());
}

TEST(StoreArgsTest, ThereIsNoFlagForThePasswordItself) {
  EXPECT_THROW(ParseStoreFlags({"--store-password", "x"}, FakeEnv{}), CLI::ParseError);
}

TEST(StoreUrlTest, LoopbackHosts) {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "127.255.255.254", "::1", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1",
                        "localhost", "LocalHost", "localhost."})
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  for (const char* h : {"10.99.0.11", "128.0.0.1", "0.0.0.0", "::", "::ffff:10.0.0.1", "fe80::1", "localhost.example",
                        "mylocalhost", "etcd", "127.0.0.1.nip.io", ""})
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
}

TEST(StoreArgsTest, PlainEtcdOffLoopbackNeedsInsecureStore) {
  // Refused without the flag, naming the flag, the address and the risk.
  const StoreOptions plain = ParseStoreFlags({}, FakeEnv{});
  EXPECT_FALSE(plain.insecure_store);
  for (const char* url : {"etcd://10.99.0.11:2379", "etcd://etcd.example:2379", "etcd://[fe80::1]:2379",
                          "etcd://0.0.0.0:2379"}) {
    const Status st = CheckStoreTransport(url, plain);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << url;
    EXPECT_NE(st.message().find("--insecure-store"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(url), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("read and rewrite"), std::string::npos) << st.message();
  }
  // Accepted with the flag (a warning is logged).
  const StoreOptions insecure = ParseStoreFlags({"--insecure-store"}, FakeEnv{});
  EXPECT_TRUE(insecure.insecure_store);
  EXPECT_TRUE(CheckStoreTransport("etcd://10.99.0.11:2379", insecure).ok());
  // Loopback, TLS and memory:// need nothing.
  for (const char* url : {"etcd://127.0.0.1:2379", "etcd://localhost:2379", "etcd://[::1]:2379",
                          "etcds://10.99.0.11:2379", "etcds://etcd.example:2379", "memory://"})
    EXPECT_TRUE(CheckStoreTransport(url, plain).ok()) << url << ": " << CheckStoreTransport(url, plain).message();
  // A bad URL is still a bad URL.
  EXPECT_EQ(CheckStoreTransport("redis://x", plain).code(), StatusCode::kInvalidArgument);
}

TEST(StoreArgsTest, OpenStoreWaitingRefusesPlainRemoteBeforeConnecting) {
  // No etcd anywhere: the refusal comes before any connection attempt (and so at once,
  // even with a long --store-wait).
  const auto t0 = std::chrono::steady_clock::now();
  auto s = OpenStoreWaiting("etcd://192.0.2.1:2379", StoreOptions{}, 30);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("--insecure-store"), std::string::npos) << s.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

}  // namespace
}  // namespace elastrain
