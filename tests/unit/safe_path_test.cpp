// common/safe_path.h: nothing below a guarded run directory is reached through a link.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/files.h"
#include "common/metrics.h"
#include "common/safe_path.h"
#include "test_dirs.h"

namespace elastrain {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A guarded run directory `run` beside a victim file `secret` that links point at.
class SafePathTest : public ::testing::Test {
 protected:
  SafePathTest() : tmp_("safe_path") {
    run_ = tmp_.path() + "/run";
    victim_ = tmp_.path() + "/secret";
    std::ofstream(victim_) << "keep me\n";
    fs::create_directories(run_);
    GuardDirectory(run_);
  }
  bool VictimUntouched() { return Slurp(victim_) == "keep me\n" && fs::is_regular_file(victim_); }

  ScopedTempDir tmp_;
  std::string run_, victim_;
};

TEST_F(SafePathTest, AppendsThroughALinkAreRefused) {
  fs::create_symlink(victim_, run_ + "/events.jsonl");
  MetricsWriter w;
  Status st = w.Open(run_ + "/events.jsonl", /*append=*/true);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();
  EXPECT_NE(st.message().find("events.jsonl: is a symbolic link"), std::string::npos) << st.message();
  EXPECT_TRUE(VictimUntouched());
}

TEST_F(SafePathTest, ReadsAndWritesThroughALinkedFolderAreRefused) {
  fs::create_directories(tmp_.path() + "/elsewhere");
  fs::create_directory_symlink(tmp_.path() + "/elsewhere", run_ + "/checkpoints");
  Status st = WriteFileAtomic(run_ + "/checkpoints/latest", "step_1\n");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("checkpoints"), std::string::npos) << st.message();
  EXPECT_TRUE(fs::is_empty(tmp_.path() + "/elsewhere"));
  EXPECT_FALSE(MakeDirs(run_ + "/checkpoints/step_1").ok());
  EXPECT_TRUE(fs::is_empty(tmp_.path() + "/elsewhere"));
  fs::create_symlink(victim_, run_ + "/config.yml");
  auto read = ReadFile(run_ + "/config.yml");
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kPermissionDenied);
}

TEST_F(SafePathTest, AtomicWriteReplacesALinkNotItsTarget) {
  fs::create_symlink(victim_, run_ + "/head_url");
  // The leaf is renamed over: the link itself goes, what it pointed at stays.
  ASSERT_TRUE(WriteFileAtomic(run_ + "/head_url", "http://x\n").ok());
  EXPECT_FALSE(fs::is_symlink(run_ + "/head_url"));
  EXPECT_EQ(Slurp(run_ + "/head_url"), "http://x\n");
  EXPECT_TRUE(VictimUntouched());
  // A planted temporary name is never written through either.
  const std::string tmp = run_ + "/summary.json.tmp." + std::to_string(::getpid());
  fs::create_symlink(victim_, tmp);
  ASSERT_TRUE(WriteFileAtomic(run_ + "/summary.json", "{}\n").ok());
  EXPECT_TRUE(VictimUntouched());
}

TEST_F(SafePathTest, ALinkedRunDirectoryIsRefused) {
  const std::string linked = tmp_.path() + "/linked_run";
  fs::create_directory_symlink(run_, linked);
  GuardDirectory(linked);
  Status st = WriteFileAtomic(linked + "/config.yml", "x");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("linked_run"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(run_ + "/config.yml"));
}

TEST_F(SafePathTest, ARunDirectoryOfAnotherUserOrWritableByOthersIsRefused) {
  ASSERT_TRUE(MakeDirs(run_ + "/logs").ok());  // our own: fine
  ::chmod(run_.c_str(), 0777);
  Status st = WriteFileAtomic(run_ + "/config.yml", "x");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("writable by others"), std::string::npos) << st.message();
  ::chmod(run_.c_str(), 0755);
  if (::geteuid() == 0) {  // as root, the directory can be given away to test the owner rule
    std::ofstream(run_ + "/events.jsonl") << "{}\n";
    ASSERT_EQ(::chown(run_.c_str(), 65534, 65534), 0);
    st = WriteFileAtomic(run_ + "/config.yml", "x");
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("owned by uid 65534"), std::string::npos) << st.message();
    EXPECT_TRUE(ReadFile(run_ + "/events.jsonl").ok()) << "reading another user's run is fine";
    ASSERT_EQ(::chown(run_.c_str(), 0, 0), 0);
  }
  EXPECT_TRUE(WriteFileAtomic(run_ + "/config.yml", "x").ok());
}

TEST_F(SafePathTest, NewDirectoriesBelowARunAreMadeAndDotDotIsNotFollowedOut) {
  const std::string fresh = tmp_.path() + "/fresh_run";
  GuardDirectory(fresh);
  ASSERT_TRUE(MakeDirs(fresh + "/checkpoints/step_00000001").ok());
  EXPECT_TRUE(fs::is_directory(fresh + "/checkpoints/step_00000001"));
  // ".." is resolved lexically before the walk, so it cannot climb out of a link.
  EXPECT_FALSE(IsGuarded(fresh + "/../secret"));
  EXPECT_TRUE(IsGuarded(fresh + "/a/../b"));
}

TEST(SafePathOutside, AppendsOutsideRunsDoNotFollowLinksButReadsDo) {
  ScopedTempDir tmp("safe_path_outside");
  const std::string target = tmp.path() + "/target", link = tmp.path() + "/link";
  std::ofstream(target) << "text\n";
  fs::create_symlink(target, link);
  EXPECT_FALSE(IsGuarded(link));
  MetricsWriter w;
  EXPECT_FALSE(w.Open(link, /*append=*/true).ok());
  auto read = ReadFile(link);  // a user's own link to a config is fine
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read.value(), "text\n");
}

}  // namespace
}  // namespace elastrain
