// A host's health check (elastic/health_check.h): its command's outcomes (exit 0, a
// failure with its output as the reason, a timeout, output longer than the limit), the
// run directory step, the built-in probe and the record RunHealthCheck makes. Real
// processes (/bin/sh), no store: its reachability is a callback.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include <fmt/format.h>

#include "common/files.h"
#include "elastic/health_check.h"

namespace elastrain {
namespace {
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using std::chrono::milliseconds;

std::string TempDir() {
  char dir[] = "/tmp/elastrain-health-test-XXXXXX";
  EXPECT_NE(::mkdtemp(dir), nullptr);
  return dir;
}

TEST(HealthCheckCommand, ExitZeroIsHealthy) {
  const CommandResult r = RunCheckCommand("echo all good; exit 0", milliseconds(10000));
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.reason, "");
}

TEST(HealthCheckCommand, AFailureKeepsItsOutputAsTheReason) {
  const CommandResult r = RunCheckCommand("echo 'GPU 3: ECC errors' >&2; exit 3", milliseconds(10000));
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.reason, HasSubstr("exited with code 3"));
  EXPECT_THAT(r.reason, HasSubstr("GPU 3: ECC errors"));
}

TEST(HealthCheckCommand, AKilledCommandSaysBySignal) {
  const CommandResult r = RunCheckCommand("kill -9 $$", milliseconds(10000));
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.reason, HasSubstr("signal 9"));
}

TEST(HealthCheckCommand, ACommandPastItsTimeoutIsKilledWithWhatItStarted) {
  const std::string dir = TempDir();
  // The shell starts a child that would outlive it; the process group goes as a whole.
  const CommandResult r =
      RunCheckCommand(fmt::format("echo started; (sleep 30; touch {}/late) & sleep 30", dir), milliseconds(200));
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.reason, HasSubstr("did not end within 0.2s and was killed"));
  EXPECT_THAT(r.reason, HasSubstr("started"));
  ::rmdir(dir.c_str());
}

TEST(HealthCheckCommand, ACancelledCheckKillsItsCommand) {
  // Cancelled at once, right after the fork: the kill must find the command's process
  // group then too (it took the whole 30 s when only the child set its group).
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r = RunCheckCommand("sleep 30", milliseconds(60000), kHealthOutputLimit, [] { return true; });
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.reason, HasSubstr("the agent is stopping"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << "killed, not waited for";
}

TEST(HealthCheckCommand, OnlyTheTailOfALongOutputIsKept) {
  const CommandResult r =
      RunCheckCommand("i=0; while [ $i -lt 2000 ]; do echo line $i; i=$((i+1)); done; exit 1", milliseconds(10000), 100);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.reason, HasSubstr("line 1999"));
  EXPECT_THAT(r.reason, Not(HasSubstr("line 0\n")));
  EXPECT_LT(r.reason.size(), 300u);
}

TEST(HealthCheckCommand, AMissingProgramIsAFailureNotACrash) {
  const CommandResult r = RunCheckCommand("/no/such/health-check", milliseconds(10000));
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.reason, HasSubstr("/no/such/health-check"));
}

TEST(HealthCheckSteps, TheRunDirectoryMustBeWritable) {
  const std::string dir = TempDir();
  EXPECT_TRUE(CheckWritable(dir).ok());
  auto files = ListFilesRecursive(dir);
  ASSERT_TRUE(files.ok());
  EXPECT_TRUE(files->empty()) << "the probe file is removed";
  const Status missing = CheckWritable(dir + "/missing");
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.message(), HasSubstr(dir + "/missing"));
  ::rmdir(dir.c_str());
}

TEST(HealthCheckSteps, TheProbeMeasuresBothFigures) {
  const ProbeFigures f = RunProbe(milliseconds(20));
  EXPECT_GT(f.gemm_gflops, 0);
  EXPECT_GT(f.memory_gbps, 0);
}

TEST(HealthCheckRecord, ARecordNamesTheFirstFailingStep) {
  HealthCheckOptions opt;
  opt.probe = false;
  opt.command = "echo bad; exit 1";
  opt.store_reachable = [] { return Status::Unavailable("etcd://10.0.0.1:2379: connection refused"); };
  const HealthRecord r = RunHealthCheck(opt, "h1", "a1", 60);
  EXPECT_EQ(r.host, "h1");
  EXPECT_EQ(r.agent, "a1");
  EXPECT_EQ(r.check, "echo bad; exit 1");
  EXPECT_FALSE(r.healthy);
  EXPECT_THAT(r.reason, StartsWith("the store did not answer"));
  EXPECT_EQ(r.expires_at, r.checked_at + kHealthRecordPeriods * 60);
}

TEST(HealthCheckRecord, AllStepsPassing) {
  const std::string dir = TempDir();
  HealthCheckOptions opt;
  opt.run_dir = dir;
  opt.command = "true";
  opt.store_reachable = [] { return Status::OK(); };
  const HealthRecord r = RunHealthCheck(opt, "h1", "a1", 10);
  EXPECT_TRUE(r.healthy) << r.reason;
  EXPECT_EQ(r.reason, "");
  EXPECT_GT(r.gemm_gflops, 0);
  EXPECT_GT(r.memory_gbps, 0);
  EXPECT_GT(r.checked_at, 0);
  ::rmdir(dir.c_str());
}

TEST(HealthCheckRecord, AnUnwritableRunDirectoryFails) {
  HealthCheckOptions opt;
  opt.probe = false;
  opt.run_dir = "/proc/elastrain-no-such-dir";
  const HealthRecord r = RunHealthCheck(opt, "h1", "a1", 10);
  EXPECT_FALSE(r.healthy);
  EXPECT_EQ(r.check, "builtin");
  EXPECT_THAT(r.reason, HasSubstr("/proc/elastrain-no-such-dir"));
}

}  // namespace
}  // namespace elastrain
