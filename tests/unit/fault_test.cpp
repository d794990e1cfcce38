// The fault-injection mechanism (common/fault.h): the ELASTRAIN_FAULT grammar, hostile
// text, each point firing where its conditions match and nowhere else, the config
// front-end (train/rehearsal.h), and docs/faults.md listing exactly the points there are.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>

#include "common/fault.h"
#include "train/rehearsal.h"

namespace elastrain::fault {
namespace {

// Sets ELASTRAIN_FAULT for one scope, restoring its absence after.
class ScopedFaultEnv {
 public:
  explicit ScopedFaultEnv(const std::string& text) { ::setenv(kEnv, text.c_str(), 1); }
  ~ScopedFaultEnv() { ::unsetenv(kEnv); }
};

// A context that carries every condition `keys` names, matching `f`'s conditions when
// `match`, otherwise off by one in each.
Context ContextFor(unsigned keys, bool match) {
  Context c;
  if (keys & kGen) c.generation = match ? 2 : 3;
  if (keys & kRank) c.rank = match ? 1 : 0;
  if (keys & kStep) c.step = match ? 40 : 41;
  if (keys & kPath) c.path = match ? "/runs/r/checkpoints/step_00000040/params-00001.safetensors" : "/runs/r/x";
  return c;
}

std::string SelectorFor(unsigned keys) {
  std::string out;
  auto add = [&](const std::string& cond) { out += (out.empty() ? "@" : ":") + cond; };
  if (keys & kGen) add("gen=2");
  if (keys & kRank) add("rank=1");
  if (keys & kStep) add("step=40");
  if (keys & kPath) add("path=step_00000040");
  return out;
}

TEST(FaultParse, EmptyIsNoFaults) {
  auto r = ParseFaults("");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
}

TEST(FaultParse, PointsAndConditions) {
  auto r = ParseFaults("kill_after_update@gen=0:rank=1:step=6,crash_before_commit@path=step_00000020,fail_write");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 3u);
  const Fault& kill = (*r)[0];
  EXPECT_EQ(kill.point, Point::kKillAfterUpdate);
  EXPECT_EQ(kill.generation, 0);
  EXPECT_EQ(kill.rank, 1);
  EXPECT_EQ(kill.step, 6);
  EXPECT_FALSE(kill.path);
  EXPECT_EQ((*r)[1].point, Point::kCrashBeforeCommit);
  EXPECT_EQ((*r)[1].path, "step_00000020");
  EXPECT_EQ((*r)[2].point, Point::kFailWrite);
  EXPECT_FALSE((*r)[2].path);
}

TEST(FaultParse, ConditionsInAnyOrder) {
  auto a = ParseFaults("hang_after_step@step=3:rank=2"), b = ParseFaults("hang_after_step@rank=2:step=3");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.value(), b.value());
}

TEST(FaultParse, FormatRoundTripsEveryPoint) {
  for (const PointInfo& p : FaultPoints()) {
    const std::string text = std::string(p.name) + SelectorFor(p.keys);
    auto r = ParseFaults(text);
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().message();
    ASSERT_EQ(r->size(), 1u);
    EXPECT_EQ(FormatFault(r->front()), text);
    EXPECT_EQ(FormatFault(ParseFaults(p.name)->front()), p.name);
  }
}

// Hostile text: each is a clear InvalidArgument naming the variable and the reason.
TEST(FaultParse, HostileTextIsAClearError) {
  const std::pair<std::string, std::string> cases[] = {
      {"explode", "unknown fault point 'explode': expected one of crash_after_shard"},
      {",", "an empty fault"},
      {"fail_write,", "an empty fault"},
      {",fail_write", "an empty fault"},
      {"fail_write,,crash_before_commit", "an empty fault"},
      {"@", "unknown fault point ''"},
      {"fail_write@", "nothing after '@'"},
      {"fail_write@path", "condition 'path': expected key=value"},
      {"fail_write@path=", "path=: expected a non-empty substring"},
      {"fail_write@path=a@b", "without '@'"},
      {"fail_write@rank=1", "this point's context has no rank (it takes: path)"},
      {"kill_after_update@path=x", "this point's context has no path (it takes: gen, rank, step)"},
      {"kill_after_update@host=h1", "unknown condition 'host'"},
      {"kill_after_update@gen=", "gen=: expected an integer >= 0"},
      {"kill_after_update@gen=-1", "gen=-1: expected an integer >= 0"},
      {"kill_after_update@step=1x", "step=1x: expected an integer >= 0"},
      {"kill_after_update@step= 1", "expected an integer >= 0"},
      {"kill_after_update@step=0x10", "expected an integer >= 0"},
      {"kill_after_update@step=99999999999999999999999", "expected an integer >= 0"},
      {"kill_after_update@rank=2000000", "expected a rank below 1000000"},
      {"kill_after_update@gen=1:gen=2", "gen given twice"},
      {"kill_after_update@gen=1:", "condition '': expected key=value"},
      {"kill_after_update@:gen=1", "condition '': expected key=value"},
      {"KILL_AFTER_UPDATE", "unknown fault point"},
      {" fail_write", "unknown fault point ' fail_write'"},
      {std::string("fail\0write", 10), "unknown fault point 'fail?write'"},
      {"fail_write@path=\x1b[31m", "path=?[31m"},
      {std::string(5000, 'a'), "longer than 4096 characters"},
  };
  for (const auto& [text, want] : cases) {
    auto r = ParseFaults(text);
    ASSERT_FALSE(r.ok()) << "accepted: " << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("ELASTRAIN_FAULT"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(want), std::string::npos) << "for '" << text << "': " << r.status().message();
  }
}

TEST(FaultParse, TooManyFaultsIsAnError) {
  std::string text = "fail_write";
  for (int i = 0; i < 64; ++i) text += ",fail_write";
  auto r = ParseFaults(text);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more than 64 faults"), std::string::npos) << r.status().message();
  text.resize(text.size() - std::string(",fail_write").size());  // 64: accepted
  EXPECT_TRUE(ParseFaults(text).ok());
}

// Random bytes drawn from the grammar's alphabet and beyond: never a crash, and every
// answer is either faults or an InvalidArgument.
TEST(FaultParse, RandomTextNeverCrashes) {
  const std::string alphabet = "fail_write@kill_after_update:=,gen=rank=step=path=0123456789-@:,\x01\xff ";
  std::mt19937 rng(31);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    const int n = static_cast<int>(rng() % 48);
    for (int k = 0; k < n; ++k) text += alphabet[rng() % alphabet.size()];
    if (i % 3 == 0) text = std::string(i % 2 ? "kill_after_update@" : "fail_write@") + text;
    auto r = ParseFaults(text);
    if (r.ok()) ++accepted;
    else EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
  }
  EXPECT_GT(accepted, 0);  // the generator reaches valid text too (the empty string at least)
}

TEST(FaultCheck, EnvironmentIsCheckedAsAWhole) {
  ::unsetenv(kEnv);
  EXPECT_TRUE(CheckEnvironment().ok());
  {
    ScopedFaultEnv env("fail_write@path=x");
    EXPECT_TRUE(CheckEnvironment().ok());
  }
  ScopedFaultEnv env("fail_write@rank=3");
  EXPECT_EQ(CheckEnvironment().code(), StatusCode::kInvalidArgument);
}

// Every point fires where its conditions match, and not at another point, nor where one
// condition differs, nor once the variable is unset.
TEST(FaultFires, EachPointWhereItsConditionsMatch) {
  for (const PointInfo& p : FaultPoints()) {
    SCOPED_TRACE(p.name);
    ScopedFaultEnv env(std::string(p.name) + SelectorFor(p.keys));
    EXPECT_TRUE(Fires(p.point, ContextFor(p.keys, true)));
    EXPECT_FALSE(Fires(p.point, ContextFor(p.keys, false)));
    for (const PointInfo& other : FaultPoints()) {
      if (other.point == p.point) continue;
      EXPECT_FALSE(Fires(other.point, ContextFor(other.keys, true))) << other.name;
    }
    // One condition off at a time: no fire.
    for (unsigned key : {kGen, kRank, kStep, kPath}) {
      if (!(p.keys & key)) continue;
      Context c = ContextFor(p.keys, true);
      const Context off = ContextFor(p.keys, false);
      if (key == kGen) c.generation = off.generation;
      if (key == kRank) c.rank = off.rank;
      if (key == kStep) c.step = off.step;
      if (key == kPath) c.path = off.path;
      EXPECT_FALSE(Fires(p.point, c)) << "key " << key;
    }
  }
  EXPECT_FALSE(Fires(Point::kFailWrite, ContextFor(kPath, true)));  // unset: nothing armed
}

TEST(FaultFires, NoConditionsFiresEverywhere) {
  ScopedFaultEnv env("kill_mid_snapshot");
  EXPECT_TRUE(Fires(Point::kKillMidSnapshot, {.generation = 0, .rank = 7, .step = 123}));
  EXPECT_TRUE(Fires(Point::kKillMidSnapshot, {}));
}

TEST(FaultFires, AContextWithoutTheConditionDoesNotMatch) {
  ScopedFaultEnv env("kill_after_update@rank=0");
  EXPECT_FALSE(Fires(Point::kKillAfterUpdate, {.generation = 0, .step = 1}));  // rank unknown (-1)
  EXPECT_TRUE(Fires(Point::kKillAfterUpdate, {.generation = 0, .rank = 0, .step = 1}));
}

TEST(FaultFires, AMalformedEnvironmentArmsNothing) {
  ScopedFaultEnv env("fail_write,explode");
  EXPECT_FALSE(Fires(Point::kFailWrite, {.path = "/x"}));
}

TEST(FaultFires, ChangesOfTheVariableAreSeen) {
  {
    ScopedFaultEnv env("crash_before_commit");
    EXPECT_TRUE(Fires(Point::kCrashBeforeCommit, {.path = "/d"}));
  }
  EXPECT_FALSE(Fires(Point::kCrashBeforeCommit, {.path = "/d"}));
  ScopedFaultEnv env("crash_before_latest");
  EXPECT_FALSE(Fires(Point::kCrashBeforeCommit, {.path = "/d"}));
  EXPECT_TRUE(Fires(Point::kCrashBeforeLatest, {.path = "/d"}));
}

TEST(FaultArm, AFrontEndArmsAndDisarmsItsOwnFaults) {
  ::unsetenv(kEnv);
  Fault f;
  f.point = Point::kHangAfterStep;
  f.step = 5;
  ArmFaults("test_a", {f});
  ArmFaults("test_b", {});
  EXPECT_TRUE(Fires(Point::kHangAfterStep, {.rank = 0, .step = 5}));
  EXPECT_FALSE(Fires(Point::kHangAfterStep, {.rank = 0, .step = 6}));
  ArmFaults("test_b", {});  // another origin's disarm leaves test_a's fault
  EXPECT_TRUE(Fires(Point::kHangAfterStep, {.rank = 0, .step = 5}));
  ArmFaults("test_a", {});
  EXPECT_FALSE(Fires(Point::kHangAfterStep, {.rank = 0, .step = 5}));
}

// A crash point kills the process with SIGKILL when it fires, and only then.
TEST(FaultCrash, CrashIfFiresKillsOnlyWhenItFires) {
  for (const bool match : {true, false}) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::setenv(kEnv, "kill_after_update@gen=0:rank=1:step=6", 1);
      CrashIfFires(Point::kKillAfterUpdate, {.generation = 0, .rank = 1, .step = match ? 6 : 7});
      ::_exit(0);
    }
    int wstatus = 0;
    ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
    if (match) {
      ASSERT_TRUE(WIFSIGNALED(wstatus)) << "exited " << WEXITSTATUS(wstatus);
      EXPECT_EQ(WTERMSIG(wstatus), SIGKILL);
    } else {
      ASSERT_TRUE(WIFEXITED(wstatus));
      EXPECT_EQ(WEXITSTATUS(wstatus), 0);
    }
  }
}

// ---- the config front-end: fail_at_step, fail_rank, fail_mode -------------------------
TEST(FaultRehearsal, FailModeNamesThePointAfterTheStep) {
  const std::pair<FailMode, Point> modes[] = {{FailMode::kExit, Point::kExitAfterStep},
                                              {FailMode::kKill, Point::kKillAfterStep},
                                              {FailMode::kHang, Point::kHangAfterStep},
                                              {FailMode::kPreempt, Point::kPreemptAfterStep},
                                              {FailMode::kKillMidSnapshot, Point::kKillMidSnapshot}};
  for (const auto& [mode, point] : modes) {
    TrainConfig cfg;
    cfg.fail_at_step = 12;
    cfg.fail_rank = 3;
    cfg.fail_mode = mode;
    const auto faults = RehearsalFaults(cfg);
    ASSERT_EQ(faults.size(), 1u);
    EXPECT_EQ(faults[0].point, point);
    EXPECT_EQ(FormatFault(faults[0]), std::string(Info(point).name) + "@rank=3:step=12");
  }
  TrainConfig off;
  EXPECT_TRUE(RehearsalFaults(off).empty()) << "fail_at_step=0 rehearses nothing";
}

TEST(FaultRehearsal, ArmedOnlyInTheGenerationsThePolicyArms) {
  ::unsetenv(kEnv);
  TrainConfig cfg;
  cfg.fail_at_step = 10;
  cfg.fail_rank = 1;
  cfg.fail_mode = FailMode::kKill;
  const Context at{.generation = 0, .rank = 1, .step = 10};
  ArmRehearsal(cfg, true);
  EXPECT_TRUE(Fires(Point::kKillAfterStep, at));
  EXPECT_FALSE(Fires(Point::kKillAfterStep, {.generation = 0, .rank = 0, .step = 10}));
  EXPECT_FALSE(Fires(Point::kExitAfterStep, at));
  ArmRehearsal(cfg, false);  // a later generation, after the rehearsal fired
  EXPECT_FALSE(Fires(Point::kKillAfterStep, at));
}

// ---- docs/faults.md lists exactly the points there are ---------------------------------
std::string SourceDir() {
  if (const char* env = std::getenv("ELASTRAIN_SOURCE_DIR")) return env;
  return ELASTRAIN_SOURCE_DIR_DEFAULT;
}

TEST(FaultDocs, TheTableListsEveryPoint) {
  std::ifstream in(SourceDir() + "/docs/faults.md");
  ASSERT_TRUE(in) << SourceDir() << "/docs/faults.md";
  std::set<std::string> documented;
  std::string line;
  bool in_table = false;  // the rows under "## The fault points"
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_table = line == "## The fault points";
    // A point's row: "| `name` | ...", its name the first cell.
    if (!in_table || line.rfind("| `", 0) != 0) continue;
    const size_t end = line.find('`', 3);
    if (end != std::string::npos) documented.insert(line.substr(3, end - 3));
  }
  std::set<std::string> points;
  for (const PointInfo& p : FaultPoints()) points.insert(p.name);
  for (const std::string& p : points) EXPECT_TRUE(documented.count(p)) << p << " is missing from docs/faults.md";
  for (const std::string& d : documented)
    EXPECT_TRUE(points.count(d) || d.rfind("chaos ", 0) == 0) << d << " in docs/faults.md is no fault point";
}

TEST(FaultPoints, InfoIsIndexedByPoint) {
  for (size_t i = 0; i < FaultPoints().size(); ++i) EXPECT_EQ(static_cast<size_t>(FaultPoints()[i].point), i);
}

}  // namespace
}  // namespace elastrain::fault
