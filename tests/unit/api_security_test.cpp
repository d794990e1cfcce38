// The control API's security pieces without a server: the token files' trust rule
// (jobctl/run_token.h), the bearer comparison, the request bodies
// (monitor/api_requests.h), the Host and Content-Type checks (monitor/request_guard.h),
// and where the CLI sends which token (cli/api_client.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "cli/api_client.h"
#include "common/files.h"
#include "jobctl/run_token.h"
#include "monitor/api_requests.h"
#include "monitor/request_guard.h"
#include "test_dirs.h"

namespace elastrain {
namespace {

const std::string kToken(64, 'a');

// Writes `text` to `path` with `mode` (whatever the umask).
void WriteWithMode(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  ASSERT_EQ(chmod(path.c_str(), mode), 0);
}

std::string Contents(const std::string& path) {
  auto t = ReadFile(path);
  return t.ok() ? t.value() : "<none>";
}

TEST(TokenFile, CreatedOnceWithMode0600AndKept) {
  ScopedTempDir scratch("token");
  const std::string dir = scratch.path();
  const mode_t old_umask = umask(0277);  // would leave 0400 without the fchmod
  auto t = EnsureRunToken(dir);
  umask(old_umask);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->size(), 64u);
  struct stat st {};
  ASSERT_EQ(lstat((dir + "/token").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600);
  auto again = EnsureRunToken(dir);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again.value(), t.value());
  ScopedTempDir other("token2"), empty("token3");
  EXPECT_NE(EnsureRunToken(other.path()).value(), t.value());
  auto none = ReadRunToken(empty.path());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  // No temporary file is left beside it.
  auto files = ListFilesRecursive(dir);
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 1u);
}

TEST(TokenFile, AModeOtherThan0600IsRefusedAndLeftAlone) {
  ScopedTempDir scratch("token_mode");
  const std::string dir = scratch.path();
  const std::string path = dir + "/token";
  for (mode_t mode : {0644, 0640, 0604, 0660, 0400, 0700}) {
    WriteWithMode(path, kToken + "\n", mode);
    auto t = EnsureRunToken(dir);
    ASSERT_FALSE(t.ok()) << std::oct << mode;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(path), std::string::npos) << t.status().message();
    char want[8];
    std::snprintf(want, sizeof(want), "%04o", mode);
    EXPECT_NE(t.status().message().find(want), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find("0600"), std::string::npos) << t.status().message();
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, mode) << "the file was changed";
    EXPECT_EQ(Contents(path), kToken + "\n");
  }
}

TEST(TokenFile, ASymlinkIsRefusedEvenToATrustedFile) {
  ScopedTempDir scratch("token_link");
  const std::string dir = scratch.path();
  const std::string target = dir + "/elsewhere";
  WriteWithMode(target, kToken + "\n", 0600);
  ASSERT_EQ(symlink(target.c_str(), (dir + "/token").c_str()), 0);
  auto t = EnsureRunToken(dir);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("symbolic link"), std::string::npos) << t.status().message();
  struct stat st {};
  ASSERT_EQ(lstat((dir + "/token").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the link was replaced";
  // A dangling link is refused too, never created through.
  ScopedTempDir scratch2("token_dangling");
  const std::string dir2 = scratch2.path();
  ASSERT_EQ(symlink((dir2 + "/created_through_link").c_str(), (dir2 + "/token").c_str()), 0);
  EXPECT_FALSE(EnsureRunToken(dir2).ok());
  EXPECT_FALSE(FileExists(dir2 + "/created_through_link"));
}

TEST(TokenFile, NotARegularFileIsRefused) {
  ScopedTempDir scratch("token_fifo");
  const std::string dir = scratch.path();
  ASSERT_EQ(mkfifo((dir + "/token").c_str(), 0600), 0);
  auto t = EnsureRunToken(dir);  // must not block on the FIFO
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("FIFO"), std::string::npos) << t.status().message();
  ScopedTempDir scratch2("token_dir");
  const std::string dir2 = scratch2.path();
  ASSERT_EQ(mkdir((dir2 + "/token").c_str(), 0700), 0);
  EXPECT_FALSE(EnsureRunToken(dir2).ok());
}

TEST(TokenFile, AnotherOwnerIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another user";
  const passwd* nobody = getpwnam("nobody");
  if (!nobody) GTEST_SKIP() << "no user nobody";
  ScopedTempDir scratch("token_owner");
  const std::string dir = scratch.path();
  const std::string path = dir + "/token";
  WriteWithMode(path, kToken + "\n", 0600);
  ASSERT_EQ(chown(path.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
  auto t = EnsureRunToken(dir);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("owned by nobody"), std::string::npos) << t.status().message();
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, nobody->pw_uid);
}

TEST(TokenFile, WrongContentIsRefused) {
  ScopedTempDir scratch("token_content");
  const std::string dir = scratch.path();
  const std::string path = dir + "/token";
  for (const std::string& text : {std::string(""), std::string("\n"), kToken.substr(1) + "\n", kToken + "0\n",
                                  std::string(64, 'G') + "\n", kToken + "\n\n", "Bearer " + kToken}) {
    WriteWithMode(path, text, 0600);
    auto t = ReadRunToken(dir);
    ASSERT_FALSE(t.ok()) << "'" << text << "'";
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find("does not hold a token"), std::string::npos) << t.status().message();
    EXPECT_EQ(Contents(path), text) << "EnsureRunToken must not rewrite it";
    EXPECT_FALSE(EnsureRunToken(dir).ok());
  }
  WriteWithMode(path, kToken, 0600);  // no newline: fine
  EXPECT_EQ(ReadRunToken(dir).value(), kToken);
}

TEST(TokenFile, HeadTokenDirectoryIsCreated0700) {
  ScopedTempDir base_dir("head_token");
  const std::string base = base_dir.path();
  const std::string path = base + "/home/.elastrain/head_token";
  auto t = EnsureHeadToken(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  struct stat st {};
  ASSERT_EQ(stat((base + "/home/.elastrain").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700);
  EXPECT_EQ(UrlFileBeside(path), base + "/home/.elastrain/head_url");
  EXPECT_EQ(EnsureHeadToken(path).value(), t.value());
}

TEST(UrlFile, WrittenReadableAndRefusedWhenOthersMayWriteIt) {
  ScopedTempDir scratch("url_file");
  const std::string dir = scratch.path();
  const std::string path = dir + "/head_url";
  // 0600 whatever the umask (issue 34: it was 0644, readable by others).
  for (const mode_t mask : {0000, 0002, 0077}) {
    const mode_t old_umask = umask(mask);
    const Status written = WriteUrlFile(path, "http://127.0.0.1:8265");
    umask(old_umask);
    ASSERT_TRUE(written.ok()) << written.message();
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600) << "umask " << mask;
  }
  EXPECT_EQ(ReadUrlFile(path).value(), "http://127.0.0.1:8265");
  ASSERT_EQ(chmod(path.c_str(), 0664), 0);
  auto group = ReadUrlFile(path);
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  ASSERT_EQ(symlink(path.c_str(), (dir + "/link").c_str()), 0);
  EXPECT_FALSE(ReadUrlFile(dir + "/link").ok());
  EXPECT_EQ(ReadUrlFile(dir + "/none").status().code(), StatusCode::kNotFound);
  RemoveUrlFile(path, "http://127.0.0.1:9999");  // another server's: kept
  EXPECT_TRUE(FileExists(path));
  RemoveUrlFile(path, "http://127.0.0.1:8265");
  EXPECT_FALSE(FileExists(path));
}

TEST(Bearer, MatchesOnlyTheExactToken) {
  EXPECT_TRUE(BearerMatches("Bearer abc123", "abc123"));
  EXPECT_FALSE(BearerMatches("Bearer abc124", "abc123"));
  EXPECT_FALSE(BearerMatches("Bearer abc12", "abc123"));
  EXPECT_FALSE(BearerMatches("Bearer abc1234", "abc123"));
  EXPECT_FALSE(BearerMatches("abc123", "abc123"));
  EXPECT_FALSE(BearerMatches("Basic abc123", "abc123"));
  EXPECT_FALSE(BearerMatches("bearer abc123", "abc123"));
  EXPECT_FALSE(BearerMatches("Bearer  abc123", "abc123"));
  EXPECT_FALSE(BearerMatches("Bearer ", ""));
  EXPECT_FALSE(BearerMatches("", ""));
  EXPECT_FALSE(BearerMatches(std::string_view("Bearer abc\0" "23", 13), "abc123"));
}

TEST(ApiRequests, SubmitTakesOneStringField) {
  auto ok = ParseSubmitRequest(R"({"config_yaml": "steps: 10\n"})");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->config_yaml, "steps: 10\n");
  struct Case {
    std::string body, mentions;
  };
  for (const Case& c : std::vector<Case>{{"", "empty body"},
                                         {"  \n", "empty body"},
                                         {"{", "not JSON"},
                                         {"[]", "an array"},
                                         {"\"x\"", "a string"},
                                         {"{}", "field 'config_yaml': missing"},
                                         {R"({"config_yaml": 3})", "'config_yaml': expected a string, got an integer (3)"},
                                         {R"({"config_yaml": 1.5})", "'config_yaml': expected a string, got a number (1.5)"},
                                         {R"({"config_yaml": null})", "'config_yaml': expected a string, got null"},
                                         {R"({"config_yaml": ["a"]})", "'config_yaml': expected a string, got an array"},
                                         {R"({"config_yaml": {"a": 1}})", "'config_yaml': expected a string, got an object"},
                                         {R"({"config_yaml": true})", "'config_yaml': expected a string, got a boolean"},
                                         {R"({"config_yaml": ""})", "'config_yaml': empty"},
                                         {R"({"config_yaml": "a", "x": 1})", "field 'x': unknown"},
                                         {std::string(100, '[') + std::string(100, ']'), "nested deeper"},
                                         {"{\"config_yaml\": \"\xff\xfe\"}", "not JSON"}}) {
    auto r = ParseSubmitRequest(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_NE(r.status().message().find(c.mentions), std::string::npos) << c.body << ": " << r.status().message();
  }
}

TEST(ApiRequests, ChaosFieldsAndTheirTypes) {
  auto r = ParseChaosRequest(R"({"action": "kill", "rank": 2, "host": ""})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->action, "kill");
  EXPECT_EQ(r->rank, 2);
  auto h = ParseChaosRequest(R"({"action": "host", "host": "h2"})");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->rank, -1);
  EXPECT_EQ(h->host, "h2");
  EXPECT_EQ(ParseChaosRequest(R"({"action": "kill", "rank": -1, "host": "h"})")->rank, -1);
  struct Case {
    std::string body, mentions;
  };
  for (const Case& c : std::vector<Case>{{"", "empty body"},
                                         {"{}", "field 'action': missing"},
                                         {R"({"rank": 1})", "field 'action': missing"},
                                         {R"({"action": 1})", "'action': expected a string, got an integer"},
                                         {R"({"action": "kill", "rank": "1"})", "'rank': expected an integer, got a string"},
                                         {R"({"action": "kill", "rank": 1.5})", "'rank': expected an integer, got a number"},
                                         {R"({"action": "kill", "rank": true})", "'rank': expected an integer, got a boolean"},
                                         {R"({"action": "kill", "rank": -2})", "'rank': -2 is out of range"},
                                         {R"({"action": "kill", "rank": 99999999999})", "'rank': 99999999999 is out of range"},
                                         {R"({"action": "kill", "rank": -99999999999})", "'rank': -99999999999 is out of range"},
                                         {R"({"action": "host", "host": 7})", "'host': expected a string, got an integer"},
                                         {R"({"action": "host", "host": null})", "'host': expected a string, got null"},
                                         {R"({"action": "kill", "signal": 9})", "field 'signal': unknown"},
                                         {"[1]", "an array"},
                                         {"nul", "not JSON"}}) {
    auto p = ParseChaosRequest(c.body);
    ASSERT_FALSE(p.ok()) << c.body;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_NE(p.status().message().find(c.mentions), std::string::npos) << c.body << ": " << p.status().message();
  }
}

TEST(ApiRequests, ArbitraryBytesNeverThrow) {
  std::string s;
  for (int i = 0; i < 2000; ++i) {
    s.push_back(static_cast<char>((i * 7919) % 256));
    EXPECT_NO_THROW((void)ParseSubmitRequest(s));
    EXPECT_NO_THROW((void)ParseChaosRequest(s));
  }
}

TEST(RequestGuard, HostHeadersOfABind) {
  const auto loop = AllowedHostHeaders("127.0.0.1", 8265, 80, {});
  EXPECT_TRUE(HostHeaderAllowed("127.0.0.1:8265", loop));
  EXPECT_TRUE(HostHeaderAllowed("localhost:8265", loop));
  EXPECT_TRUE(HostHeaderAllowed("LocalHost:8265", loop));
  EXPECT_FALSE(HostHeaderAllowed("localhost:8266", loop));
  EXPECT_FALSE(HostHeaderAllowed("127.0.0.1", loop));  // port 8265 is not http's default
  EXPECT_FALSE(HostHeaderAllowed("evil.example:8265", loop));
  EXPECT_FALSE(HostHeaderAllowed("", loop));
  const auto v6 = AllowedHostHeaders("::1", 9000, 443, {"head.example", "proxy:8443"});
  EXPECT_TRUE(HostHeaderAllowed("[::1]:9000", v6));
  EXPECT_TRUE(HostHeaderAllowed("localhost:9000", v6));
  EXPECT_TRUE(HostHeaderAllowed("head.example:9000", v6));
  EXPECT_TRUE(HostHeaderAllowed("proxy:8443", v6));
  EXPECT_FALSE(HostHeaderAllowed("proxy:9000", v6));
  const auto named = AllowedHostHeaders("10.0.0.1", 443, 443, {});
  EXPECT_TRUE(HostHeaderAllowed("10.0.0.1", named));
  EXPECT_TRUE(HostHeaderAllowed("10.0.0.1:443", named));
  EXPECT_FALSE(HostHeaderAllowed("localhost:443", named));
  const auto any = AllowedHostHeaders("0.0.0.0", 8265, 80, {"10.0.0.2"});
  EXPECT_FALSE(HostHeaderAllowed("0.0.0.0:8265", any));
  EXPECT_TRUE(HostHeaderAllowed("10.0.0.2:8265", any));
}

TEST(RequestGuard, JsonContentType) {
  EXPECT_TRUE(IsJsonContentType("application/json"));
  EXPECT_TRUE(IsJsonContentType("Application/JSON; charset=utf-8"));
  EXPECT_FALSE(IsJsonContentType("text/plain"));
  EXPECT_FALSE(IsJsonContentType("application/x-www-form-urlencoded"));
  EXPECT_FALSE(IsJsonContentType("multipart/form-data; boundary=x"));
  EXPECT_FALSE(IsJsonContentType("application/jsonp"));
  EXPECT_FALSE(IsJsonContentType(""));
}

// --- where the CLI sends which token ----------------------------------------------
class ApiTargetTest : public testing::Test {
 protected:
  void SetUp() override {
    base_ = scratch_.path();
    default_token_ = base_ + "/home/.elastrain/head_token";
    head_token_ = EnsureHeadToken(default_token_).value();
    ASSERT_TRUE(WriteFileAtomic(UrlFileBeside(default_token_), "http://127.0.0.1:8265\n").ok());
    run_ = base_ + "/run";
    run_token_ = EnsureRunToken(run_).value();
    ASSERT_TRUE(WriteFileAtomic(run_ + "/head_url", "http://127.0.0.1:9000\n").ok());
  }
  ApiTargetArgs Args() const {
    ApiTargetArgs a;
    a.default_token_file = default_token_;
    return a;
  }
  ScopedTempDir scratch_{"api_target"};
  std::string base_, default_token_, head_token_, run_, run_token_;
};

TEST_F(ApiTargetTest, RunDirTokenGoesOnlyToTheRunsUrl) {
  ApiTargetArgs a = Args();
  a.run_dir = run_;
  a.env_token = "ignored";
  auto t = ResolveApiTarget(a);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->url, "http://127.0.0.1:9000");
  EXPECT_EQ(t->token, run_token_);
  a.head = "http://127.0.0.1:9000/";  // the same URL
  EXPECT_TRUE(ResolveApiTarget(a).ok());
  a.head = "http://127.0.0.1:9001";
  auto other = ResolveApiTarget(a);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("http://127.0.0.1:9001"), std::string::npos) << other.status().message();
  EXPECT_NE(other.status().message().find("http://127.0.0.1:9000"), std::string::npos) << other.status().message();
  a.head.clear();
  a.token_file = default_token_;
  EXPECT_FALSE(ResolveApiTarget(a).ok());
}

TEST_F(ApiTargetTest, DefaultTokenGoesOnlyToTheRecordedHead) {
  auto t = ResolveApiTarget(Args());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->url, "http://127.0.0.1:8265");
  EXPECT_EQ(t->token, head_token_);
  ApiTargetArgs a = Args();
  a.head = "HTTP://127.0.0.1:8265/";
  EXPECT_EQ(ResolveApiTarget(a).value().token, head_token_);
  a.head = "http://127.0.0.1:8266";  // another server: no default token for it
  auto other = ResolveApiTarget(a);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("--token-file"), std::string::npos) << other.status().message();
}

TEST_F(ApiTargetTest, GivenTokensGoOnlyToANamedHead) {
  ApiTargetArgs a = Args();
  a.env_token = "from-env";
  EXPECT_EQ(ResolveApiTarget(a).value().token, head_token_);  // no --head: the default pair
  a.head = "https://head.example:8265";
  auto env = ResolveApiTarget(a);
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->token, "from-env");
  EXPECT_EQ(env->url, "https://head.example:8265");
  a.token_file = run_ + "/token";
  EXPECT_EQ(ResolveApiTarget(a).value().token, run_token_);  // --token-file before the environment
  a.head.clear();
  EXPECT_FALSE(ResolveApiTarget(a).ok());  // --token-file without --head
  a.head = "https://head.example:8265";
  ASSERT_EQ(chmod(a.token_file.c_str(), 0644), 0);
  EXPECT_FALSE(ResolveApiTarget(a).ok());  // the trust rule holds for --token-file too
}

}  // namespace
}  // namespace elastrain
