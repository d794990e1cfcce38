// elastrain launch (src/launch/): the torchrun environment of each rank (RankEnvironment),
// the line protocol with a launched program (ParseProgramMessage, AssignToProgram,
// ControlToProgram), the launch_program key (LaunchProgram, its YAML round trip) and the
// CLI's `-- PROGRAM ARGS` split.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "config/config.h"
#include "wire/program_messages.h"
#include "launch/master_address.h"
#include "launch/rank_env.h"
#include "comm/rendezvous_store.h"  // MakeFileStore
#include "test_dirs.h"

#include <gloo/rendezvous/store.h>

namespace elastrain {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using Env = std::map<std::string, std::string>;

// --- RankEnvironment ---------------------------------------------------------------

RankAssignment FourRanksOnTwoHosts(int rank) {
  RankAssignment a;
  a.generation = 3;
  a.rank = rank;
  a.world = 4;
  a.members = {{0, "a"}, {1, "b"}, {2, "a"}, {3, "b"}};
  a.master_addr = "10.0.0.1";
  a.master_port = 29500;
  a.max_failures = 5;
  a.min_workers = 2;
  a.max_workers = 8;
  a.run_id = "job-7";
  a.run_dir = "/runs/demo";
  a.worker_id = "w" + std::to_string(rank);
  a.threads = 6;
  return a;
}

TEST(LaunchRankEnvTest, FourRanksOverTwoHosts) {
  // rank -> {LOCAL_RANK, GROUP_RANK}; hosts in the order of their lowest rank: a (0), b (1).
  const std::map<int, std::pair<std::string, std::string>> want = {
      {0, {"0", "0"}}, {1, {"0", "1"}}, {2, {"1", "0"}}, {3, {"1", "1"}}};
  for (const auto& [rank, local_group] : want) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const Env env = RankEnvironment(FourRanksOnTwoHosts(rank));
    const std::string r = std::to_string(rank);
    EXPECT_EQ(env.at("RANK"), r);
    EXPECT_EQ(env.at("LOCAL_RANK"), local_group.first);
    EXPECT_EQ(env.at("GROUP_RANK"), local_group.second);
    EXPECT_EQ(env.at("WORLD_SIZE"), "4");
    EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "2");
    EXPECT_EQ(env.at("GROUP_WORLD_SIZE"), "2");
    EXPECT_EQ(env.at("ROLE_RANK"), r);
    EXPECT_EQ(env.at("ROLE_WORLD_SIZE"), "4");
    EXPECT_EQ(env.at("ROLE_NAME"), "default");
    EXPECT_EQ(env.at("MASTER_ADDR"), "10.0.0.1");
    EXPECT_EQ(env.at("MASTER_PORT"), "29500");
    EXPECT_EQ(env.at("TORCHELASTIC_RESTART_COUNT"), "3");
    EXPECT_EQ(env.at("TORCHELASTIC_MAX_RESTARTS"), "5");
    EXPECT_EQ(env.at("TORCHELASTIC_RUN_ID"), "job-7");
    EXPECT_EQ(env.at("TORCHELASTIC_USE_AGENT_STORE"), "False");
    EXPECT_EQ(env.at("OMP_NUM_THREADS"), "6");
    EXPECT_EQ(env.at("ELASTRAIN_GENERATION"), "3");
    EXPECT_EQ(env.at("ELASTRAIN_RUN_DIR"), "/runs/demo");
    EXPECT_EQ(env.at("ELASTRAIN_WORLD_SIZE"), "4");
    EXPECT_EQ(env.at("ELASTRAIN_MIN_WORKERS"), "2");
    EXPECT_EQ(env.at("ELASTRAIN_MAX_WORKERS"), "8");
    EXPECT_EQ(env.at("ELASTRAIN_WORKER_ID"), "w" + r);
  }
}

TEST(LaunchRankEnvTest, ExactlyTheDocumentedVariables) {
  const std::set<std::string> documented = {
      "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
      "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
      "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE", "OMP_NUM_THREADS",
      "ELASTRAIN_GENERATION", "ELASTRAIN_RUN_DIR", "ELASTRAIN_WORLD_SIZE", "ELASTRAIN_MIN_WORKERS",
      "ELASTRAIN_MAX_WORKERS", "ELASTRAIN_WORKER_ID"};
  std::set<std::string> got;
  for (const auto& [k, v] : RankEnvironment(FourRanksOnTwoHosts(1))) got.insert(k);
  EXPECT_EQ(got, documented);
}

TEST(LaunchRankEnvTest, SingleHost) {
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    RankAssignment a;
    a.rank = rank;
    a.world = 3;
    a.members = {{0, "h"}, {1, "h"}, {2, "h"}};
    a.master_addr = "127.0.0.1";
    a.master_port = 40001;
    a.max_failures = -1;  // unlimited
    a.threads = 0;        // OMP_NUM_THREADS is at least 1
    const Env env = RankEnvironment(a);
    EXPECT_EQ(env.at("LOCAL_RANK"), std::to_string(rank));
    EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "3");
    EXPECT_EQ(env.at("GROUP_RANK"), "0");
    EXPECT_EQ(env.at("GROUP_WORLD_SIZE"), "1");
    EXPECT_EQ(env.at("WORLD_SIZE"), "3");
    EXPECT_EQ(env.at("TORCHELASTIC_RESTART_COUNT"), "0");
    EXPECT_EQ(env.at("TORCHELASTIC_MAX_RESTARTS"), "-1");
    EXPECT_EQ(env.at("OMP_NUM_THREADS"), "1");
    EXPECT_EQ(env.at("MASTER_PORT"), "40001");
  }
}

TEST(LaunchRankEnvTest, UnsortedMembersGiveTheSameRanks) {
  // Host "b" comes first in the list but "a" holds rank 0, so "a" is group 0.
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    RankAssignment sorted = FourRanksOnTwoHosts(rank);
    RankAssignment shuffled = sorted;
    shuffled.members = {{3, "b"}, {1, "b"}, {2, "a"}, {0, "a"}};
    EXPECT_EQ(RankEnvironment(shuffled), RankEnvironment(sorted));
  }
  // Three hosts, listed out of order: groups follow each host's lowest rank.
  RankAssignment a;
  a.world = 5;
  a.members = {{4, "z"}, {3, "y"}, {2, "x"}, {1, "y"}, {0, "z"}};
  const std::map<int, std::pair<std::string, std::string>> want = {// rank -> {LOCAL_RANK, GROUP_RANK}
                                                                    {0, {"0", "0"}},
                                                                    {1, {"0", "1"}},
                                                                    {2, {"0", "2"}},
                                                                    {3, {"1", "1"}},
                                                                    {4, {"1", "0"}}};
  for (const auto& [rank, local_group] : want) {
    SCOPED_TRACE("three hosts, rank " + std::to_string(rank));
    a.rank = rank;
    const Env env = RankEnvironment(a);
    EXPECT_EQ(env.at("LOCAL_RANK"), local_group.first);
    EXPECT_EQ(env.at("GROUP_RANK"), local_group.second);
    EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), rank == 2 ? "1" : "2");
    EXPECT_EQ(env.at("GROUP_WORLD_SIZE"), "3");
  }
}

TEST(LaunchRankEnvTest, RankMissingFromMembersIsAloneOnItsHost) {
  RankAssignment a;
  a.rank = 0;
  a.world = 1;
  const Env env = RankEnvironment(a);
  EXPECT_EQ(env.at("LOCAL_RANK"), "0");
  EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "1");
  EXPECT_EQ(env.at("GROUP_RANK"), "0");
  EXPECT_EQ(env.at("GROUP_WORLD_SIZE"), "1");
}

TEST(LaunchRankEnvTest, SecretEnvironmentPrefixesCoverStoreCredentialsAndToken) {
  const std::vector<std::string>& p = SecretEnvironmentPrefixes();
  auto secret = [&](const std::string& name) {
    for (const std::string& prefix : p)
      if (name.rfind(prefix, 0) == 0) return true;
    return false;
  };
  EXPECT_TRUE(secret("ELASTRAIN_ETCD_PASSWORD"));
  EXPECT_TRUE(secret("ELASTRAIN_ETCD_CERT"));
  EXPECT_TRUE(secret("ELASTRAIN_TOKEN"));
  EXPECT_TRUE(secret("ELASTRAIN_TOKEN_FILE"));
  // What a launched program is given must not be filtered out.
  for (const auto& [k, v] : RankEnvironment(FourRanksOnTwoHosts(0))) EXPECT_FALSE(secret(k)) << k;
}

// --- ParseProgramMessage ------------------------------------------------------------

Status Parse(const std::string& text, ProgramMessage* out = nullptr) {
  ProgramMessage m;
  return ParseProgramMessage(nlohmann::json::parse(text), out ? out : &m);
}

// The message is refused and its error names `field`.
void ExpectRejected(const std::string& text, const std::string& field) {
  SCOPED_TRACE(text);
  const Status st = Parse(text);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("'" + field + "'"));
}

TEST(ProgramMessageTest, Hello) {
  ProgramMessage m;
  ASSERT_TRUE(Parse(R"({"type":"hello","pid":4242,"warm":true})", &m).ok());
  ASSERT_TRUE(std::holds_alternative<ProgramHello>(m));
  EXPECT_EQ(std::get<ProgramHello>(m).pid, 4242);
  EXPECT_TRUE(std::get<ProgramHello>(m).warm);
  ASSERT_TRUE(Parse(R"({"type":"hello","pid":1})", &m).ok());
  EXPECT_FALSE(std::get<ProgramHello>(m).warm);
  ASSERT_TRUE(Parse(R"({"type":"hello"})", &m).ok());
  EXPECT_EQ(std::get<ProgramHello>(m).pid, 0);
  ASSERT_TRUE(Parse(R"({"type":"hello","pid":2147483647,"warm":false})", &m).ok());
  EXPECT_EQ(std::get<ProgramHello>(m).pid, 2147483647);
}

TEST(ProgramMessageTest, WaitingAndHeartbeat) {
  ProgramMessage m;
  ASSERT_TRUE(Parse(R"({"type":"waiting"})", &m).ok());
  EXPECT_TRUE(std::holds_alternative<ProgramWaiting>(m));
  ASSERT_TRUE(Parse(R"({"type":"heartbeat","extra":[1,2]})", &m).ok());  // unknown fields are ignored
  EXPECT_TRUE(std::holds_alternative<ProgramHeartbeat>(m));
}

TEST(ProgramMessageTest, StepWithEveryField) {
  ProgramMessage m;
  ASSERT_TRUE(Parse(R"({"type":"step","step":120,"loss":2.5,"tokens":65536,"step_seconds":0.25,)"
                    R"("metrics":{"grad_norm":1.5,"lr.peak":3e-4,"x_1":-2}})",
                    &m)
                  .ok());
  ASSERT_TRUE(std::holds_alternative<ProgramStep>(m));
  const ProgramStep& s = std::get<ProgramStep>(m);
  EXPECT_EQ(s.step, 120);
  EXPECT_DOUBLE_EQ(s.loss, 2.5);
  EXPECT_EQ(s.tokens, 65536);
  EXPECT_DOUBLE_EQ(s.step_seconds, 0.25);
  const std::map<std::string, double> metrics = {{"grad_norm", 1.5}, {"lr.peak", 3e-4}, {"x_1", -2}};
  EXPECT_EQ(s.metrics, metrics);
}

TEST(ProgramMessageTest, StepWithOnlyTheStep) {
  ProgramMessage m;
  ASSERT_TRUE(Parse(R"({"type":"step","step":0})", &m).ok());
  const ProgramStep& s = std::get<ProgramStep>(m);
  EXPECT_EQ(s.step, 0);
  EXPECT_TRUE(std::isnan(s.loss));
  EXPECT_EQ(s.tokens, 0);
  EXPECT_EQ(s.step_seconds, 0);
  EXPECT_TRUE(s.metrics.empty());
  // null is "not given" for the optional fields.
  ASSERT_TRUE(Parse(R"({"type":"step","step":1,"loss":null,"tokens":null,"step_seconds":null,"metrics":null})", &m)
                  .ok());
  EXPECT_TRUE(std::isnan(std::get<ProgramStep>(m).loss));
  // The largest step, 2^50.
  ASSERT_TRUE(Parse(R"({"type":"step","step":1125899906842624})", &m).ok());
  EXPECT_EQ(std::get<ProgramStep>(m).step, int64_t{1} << 50);
}

TEST(ProgramMessageTest, Checkpoint) {
  ProgramMessage m;
  ASSERT_TRUE(Parse(R"({"type":"checkpoint","step":200,"seconds":4.5})", &m).ok());
  ASSERT_TRUE(std::holds_alternative<ProgramCheckpoint>(m));
  EXPECT_EQ(std::get<ProgramCheckpoint>(m).step, 200);
  EXPECT_DOUBLE_EQ(std::get<ProgramCheckpoint>(m).seconds, 4.5);
  ASSERT_TRUE(Parse(R"({"type":"checkpoint","step":0})", &m).ok());
  EXPECT_EQ(std::get<ProgramCheckpoint>(m).seconds, 0);
}

TEST(ProgramMessageTest, RejectsWhatIsNotATypedObject) {
  for (const char* text : {"[]", R"(["type","step"])", R"("step")", "42", "null", "true"}) {
    SCOPED_TRACE(text);
    const Status st = Parse(text);
    ASSERT_FALSE(st.ok());
    EXPECT_THAT(st.message(), HasSubstr("JSON object"));
  }
  for (const char* text : {"{}", R"({"step":1})", R"({"type":5})", R"({"type":null})", R"({"type":["step"]})"}) {
    SCOPED_TRACE(text);
    const Status st = Parse(text);
    ASSERT_FALSE(st.ok());
    EXPECT_THAT(st.message(), HasSubstr("'type'"));
  }
}

TEST(ProgramMessageTest, RejectsAnUnknownTypeNamingIt) {
  const Status st = Parse(R"({"type":"assign","env":{}})");  // a worker -> program message
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("unknown type 'assign'"));
  const Status caps = Parse(R"({"type":"Step","step":1})");
  ASSERT_FALSE(caps.ok());
  EXPECT_THAT(caps.message(), HasSubstr("'Step'"));
  // A long type is cut in the message.
  const Status long_type = Parse(R"({"type":")" + std::string(1000, 'x') + R"("})");
  ASSERT_FALSE(long_type.ok());
  EXPECT_LT(long_type.message().size(), 200u);
}

TEST(ProgramMessageTest, RejectsABadStep) {
  ExpectRejected(R"({"type":"step"})", "step");
  ExpectRejected(R"({"type":"step","step":null})", "step");
  ExpectRejected(R"({"type":"step","step":-1})", "step");
  ExpectRejected(R"({"type":"step","step":1.5})", "step");
  ExpectRejected(R"({"type":"step","step":2.0})", "step");  // a float, even a whole one
  ExpectRejected(R"({"type":"step","step":"3"})", "step");
  ExpectRejected(R"({"type":"step","step":true})", "step");
  ExpectRejected(R"({"type":"step","step":1125899906842625})", "step");  // 2^50 + 1
  ExpectRejected(R"({"type":"step","step":9223372036854775807})", "step");
  ExpectRejected(R"({"type":"step","step":18446744073709551615})", "step");
  ExpectRejected(R"({"type":"step","step":-9223372036854775808})", "step");
  ExpectRejected(R"({"type":"step","step":1e300})", "step");
}

TEST(ProgramMessageTest, CollectiveMarks) {
  ProgramMessage m;
  ASSERT_TRUE(Parse(R"({"type":"collective","seq":41,"kind":"allreduce","inside":true})", &m).ok());
  ASSERT_TRUE(std::holds_alternative<ProgramCollective>(m));
  EXPECT_EQ(std::get<ProgramCollective>(m).seq, 41);
  EXPECT_EQ(std::get<ProgramCollective>(m).kind, "allreduce");
  EXPECT_TRUE(std::get<ProgramCollective>(m).inside);
  ASSERT_TRUE(Parse(R"({"type":"collective","seq":0,"kind":"barrier","inside":false})", &m).ok());
  EXPECT_FALSE(std::get<ProgramCollective>(m).inside);
  ExpectRejected(R"({"type":"collective","kind":"allreduce","inside":true})", "seq");
  ExpectRejected(R"({"type":"collective","seq":-1,"kind":"allreduce","inside":true})", "seq");
  ExpectRejected(R"({"type":"collective","seq":1.5,"kind":"allreduce","inside":true})", "seq");
  ExpectRejected(R"({"type":"collective","seq":1,"kind":"","inside":true})", "kind");
  ExpectRejected(R"({"type":"collective","seq":1,"kind":"rm -rf","inside":true})", "kind");
  ExpectRejected(R"({"type":"collective","seq":1,"kind":7,"inside":true})", "kind");
  ExpectRejected(R"({"type":"collective","seq":1,"kind":"allreduce"})", "inside");
  ExpectRejected(R"({"type":"collective","seq":1,"kind":"allreduce","inside":1})", "inside");
}

TEST(ProgramMessageTest, RejectsABadLoss) {
  ExpectRejected(R"({"type":"step","step":1,"loss":"NaN"})", "loss");
  ExpectRejected(R"({"type":"step","step":1,"loss":"2.5"})", "loss");
  ExpectRejected(R"({"type":"step","step":1,"loss":[2.5]})", "loss");
  // JSON text has no NaN or infinity (nlohmann refuses 1e400 as a number overflow, so the
  // channel drops such a line), but a message built in memory can hold one.
  EXPECT_TRUE(nlohmann::json::parse(R"({"loss":1e400})", nullptr, /*allow_exceptions=*/false).is_discarded());
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity()}) {
    nlohmann::json j = {{"type", "step"}, {"step", 1}, {"loss", bad}};
    ProgramMessage m;
    const Status st = ParseProgramMessage(j, &m);
    ASSERT_FALSE(st.ok());
    EXPECT_THAT(st.message(), HasSubstr("'loss'"));
  }
}

TEST(ProgramMessageTest, RejectsBadTokensAndStepSeconds) {
  ExpectRejected(R"({"type":"step","step":1,"tokens":-1})", "tokens");
  ExpectRejected(R"({"type":"step","step":1,"tokens":0.5})", "tokens");
  ExpectRejected(R"({"type":"step","step":1,"tokens":"many"})", "tokens");
  ExpectRejected(R"({"type":"step","step":1,"tokens":1125899906842625})", "tokens");
  ExpectRejected(R"({"type":"step","step":1,"step_seconds":-0.5})", "step_seconds");
  ExpectRejected(R"({"type":"step","step":1,"step_seconds":"1"})", "step_seconds");
  nlohmann::json inf = {{"type", "step"}, {"step", 1}, {"step_seconds", std::numeric_limits<double>::infinity()}};
  ProgramMessage m;
  const Status st = ParseProgramMessage(inf, &m);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("'step_seconds'"));
}

TEST(ProgramMessageTest, StepComputeSecondsIsOptionalAndAtMostTheStep) {
  ProgramMessage m;
  ASSERT_TRUE(Parse(R"({"type":"step","step":3,"step_seconds":0.5,"compute_seconds":0.375})", &m).ok());
  EXPECT_EQ(std::get<ProgramStep>(m).compute_seconds, 0.375);
  ASSERT_TRUE(Parse(R"({"type":"step","step":3,"step_seconds":0.5,"compute_seconds":0.5})", &m).ok());
  EXPECT_EQ(std::get<ProgramStep>(m).compute_seconds, 0.5) << "all of it";
  ASSERT_TRUE(Parse(R"({"type":"step","step":3,"step_seconds":0.5,"compute_seconds":0})", &m).ok());
  EXPECT_EQ(std::get<ProgramStep>(m).compute_seconds, 0.0) << "none of it";
  ASSERT_TRUE(Parse(R"({"type":"step","step":3,"step_seconds":0.5,"compute_seconds":0.5000000001})", &m).ok())
      << "a clock's rounding is no reason to drop a report";
  ASSERT_TRUE(Parse(R"({"type":"step","step":3,"compute_seconds":2.5})", &m).ok()) << "without step_seconds";
  EXPECT_EQ(std::get<ProgramStep>(m).compute_seconds, 2.5);
  for (const char* absent : {R"({"type":"step","step":3,"step_seconds":0.5})",
                             R"({"type":"step","step":3,"step_seconds":0.5,"compute_seconds":null})"}) {
    ASSERT_TRUE(Parse(absent, &m).ok()) << absent;
    EXPECT_FALSE(std::get<ProgramStep>(m).compute_seconds.has_value()) << absent;
  }
}

TEST(ProgramMessageTest, RejectsBadComputeSeconds) {
  ExpectRejected(R"({"type":"step","step":1,"step_seconds":0.5,"compute_seconds":0.6})", "compute_seconds");
  ExpectRejected(R"({"type":"step","step":1,"compute_seconds":-0.1})", "compute_seconds");
  ExpectRejected(R"({"type":"step","step":1,"compute_seconds":"0.1"})", "compute_seconds");
  ExpectRejected(R"({"type":"step","step":1,"compute_seconds":[0.1]})", "compute_seconds");
  nlohmann::json inf = {{"type", "step"}, {"step", 1}, {"compute_seconds", std::numeric_limits<double>::infinity()}};
  ProgramMessage m;
  const Status st = ParseProgramMessage(inf, &m);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("'compute_seconds'"));
}

TEST(ProgramMessageTest, MetricsAtMost32FiniteNumbersWithPlainNames) {
  nlohmann::json j = {{"type", "step"}, {"step", 1}, {"metrics", nlohmann::json::object()}};
  for (int i = 0; i < 32; ++i) j["metrics"]["m" + std::to_string(i)] = i;
  ProgramMessage m;
  ASSERT_TRUE(ParseProgramMessage(j, &m).ok());
  EXPECT_EQ(std::get<ProgramStep>(m).metrics.size(), 32u);
  j["metrics"]["m32"] = 32;
  Status st = ParseProgramMessage(j, &m);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("'metrics'"));

  ExpectRejected(R"({"type":"step","step":1,"metrics":[1,2]})", "metrics");
  ExpectRejected(R"({"type":"step","step":1,"metrics":3})", "metrics");
  const std::string longest(64, 'n');
  ASSERT_TRUE(Parse(R"({"type":"step","step":1,"metrics":{")" + longest + R"(":1}})").ok());
  for (const std::string& name : {std::string(""), std::string(65, 'n'), std::string("a b"), std::string("x/y"),
                                  std::string("loss\"quoted"), std::string("caf\u00e9"), std::string("-dash")}) {
    SCOPED_TRACE(name);
    nlohmann::json bad = {{"type", "step"}, {"step", 1}, {"metrics", {{name, 1.0}}}};
    st = ParseProgramMessage(bad, &m);
    ASSERT_FALSE(st.ok());
    EXPECT_THAT(st.message(), HasSubstr("'metrics'"));
  }
  ExpectRejected(R"({"type":"step","step":1,"metrics":{"gn":"1"}})", "metrics.gn");
  ExpectRejected(R"({"type":"step","step":1,"metrics":{"gn":null}})", "metrics.gn");
  ExpectRejected(R"({"type":"step","step":1,"metrics":{"gn":true}})", "metrics.gn");
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    nlohmann::json j2 = {{"type", "step"}, {"step", 1}, {"metrics", {{"ok", 1.0}, {"gn", bad}}}};
    st = ParseProgramMessage(j2, &m);
    ASSERT_FALSE(st.ok());
    EXPECT_THAT(st.message(), HasSubstr("'metrics.gn'"));
  }
}

TEST(ProgramMessageTest, RejectsABadCheckpoint) {
  ExpectRejected(R"({"type":"checkpoint"})", "step");
  ExpectRejected(R"({"type":"checkpoint","seconds":1})", "step");
  ExpectRejected(R"({"type":"checkpoint","step":-3})", "step");
  ExpectRejected(R"({"type":"checkpoint","step":1125899906842625})", "step");
  ExpectRejected(R"({"type":"checkpoint","step":5,"seconds":-1})", "seconds");
  ExpectRejected(R"({"type":"checkpoint","step":5,"seconds":"2"})", "seconds");
}

TEST(ProgramMessageTest, RejectsABadHello) {
  ExpectRejected(R"({"type":"hello","pid":1,"warm":"yes"})", "warm");
  ExpectRejected(R"({"type":"hello","pid":1,"warm":1})", "warm");
  ExpectRejected(R"({"type":"hello","pid":1,"warm":null})", "warm");
  ExpectRejected(R"({"type":"hello","pid":-1})", "pid");
  ExpectRejected(R"({"type":"hello","pid":2147483648})", "pid");
  ExpectRejected(R"({"type":"hello","pid":"42"})", "pid");
}

TEST(ProgramMessageTest, ErrorsNameTheMessageType) {
  const Status st = Parse(R"({"type":"checkpoint","step":-3})");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("'checkpoint'"));
}

// --- Worker -> program ----------------------------------------------------------------

TEST(ProgramMessageTest, ControlToProgramShape) {
  ProgramControl c;
  c.stop = true;
  c.reason = "preemption";
  c.deadline = 1733300100.5;
  c.checkpoint_period = 250;
  EXPECT_EQ(ControlToProgram(c), nlohmann::json::parse(R"({"type":"control","stop":true,"reason":"preemption",)"
                                                       R"("deadline":1733300100.5,"checkpoint_period":250})"));
  const nlohmann::json none = ControlToProgram(ProgramControl{});
  EXPECT_EQ(none, nlohmann::json::parse(
                      R"({"type":"control","stop":false,"reason":"","deadline":0.0,"checkpoint_period":0})"));
  EXPECT_TRUE(none["stop"].is_boolean());
  EXPECT_TRUE(none["deadline"].is_number());
  EXPECT_TRUE(none["checkpoint_period"].is_number_integer());
  // One line on the channel.
  EXPECT_EQ(ControlToProgram(c).dump().find('\n'), std::string::npos);
}

TEST(ProgramMessageTest, AssignToProgramShape) {
  const Env env = RankEnvironment(FourRanksOnTwoHosts(2));
  const nlohmann::json j = AssignToProgram(env);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.size(), 2u);
  EXPECT_EQ(j["type"], "assign");
  ASSERT_TRUE(j["env"].is_object());
  EXPECT_EQ(j["env"].size(), env.size());
  for (const auto& [k, v] : env) {
    ASSERT_TRUE(j["env"][k].is_string()) << k;
    EXPECT_EQ(j["env"][k].get<std::string>(), v);
  }
  EXPECT_EQ(AssignToProgram({}), nlohmann::json::parse(R"({"type":"assign","env":{}})"));
  // A value with a newline stays on one line.
  EXPECT_EQ(AssignToProgram({{"X", "a\nb"}}).dump().find('\n'), std::string::npos);
}

// --- launch_program -------------------------------------------------------------------

Result<std::vector<std::string>> Program(const std::string& launch_program) {
  TrainConfig c;
  c.launch_program = launch_program;
  return LaunchProgram(c);
}

void ExpectBadProgram(const std::string& launch_program) {
  SCOPED_TRACE(launch_program.substr(0, 100));
  auto p = Program(launch_program);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), StartsWith("launch_program="));
}

TEST(LaunchProgramTest, EmptyIsTheBuiltInTrainer) {
  auto p = Program("");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->empty());
}

TEST(LaunchProgramTest, AnArrayOfStrings) {
  auto p = Program(R"(["python3", "train.py", "--lr", "3e-4", "", "two words", "q\"uote"])");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const std::vector<std::string> want = {"python3", "train.py", "--lr", "3e-4", "", "two words", "q\"uote"};
  EXPECT_EQ(*p, want);
  auto one = Program(R"(["/usr/bin/env"])");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, std::vector<std::string>{"/usr/bin/env"});
}

TEST(LaunchProgramTest, RejectsWhatIsNotAnArrayOfStrings) {
  ExpectBadProgram("python3 train.py");     // not JSON
  ExpectBadProgram(R"("python3")");         // a string
  ExpectBadProgram(R"({"argv":["python3"]})");
  ExpectBadProgram("[]");
  ExpectBadProgram("[\"python3\"");         // cut
  ExpectBadProgram(R"([1])");
  ExpectBadProgram(R"(["python3", 2])");
  ExpectBadProgram(R"(["python3", null])");
  ExpectBadProgram(R"(["python3", ["nested"]])");
  ExpectBadProgram(R"([""])");              // no program name
  ExpectBadProgram(R"(["", "train.py"])");
  ExpectBadProgram(R"(["python3", "a\u0000b"])");  // NUL in an argument
  ExpectBadProgram(R"(["py\u0000thon3"])");
  ExpectBadProgram(std::string("[\"python3\", \"a") + '\0' + "b\"]");  // a raw NUL: not JSON
}

TEST(LaunchProgramTest, AtMost4096ArgumentsOfAtMost64KiB) {
  nlohmann::json argv = nlohmann::json::array({"prog"});
  while (argv.size() < 4096) argv.push_back("x");
  auto p = Program(argv.dump());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->size(), 4096u);
  argv.push_back("x");
  ExpectBadProgram(argv.dump());

  ASSERT_TRUE(Program(nlohmann::json::array({"prog", std::string(64 * 1024, 'a')}).dump()).ok());
  ExpectBadProgram(nlohmann::json::array({"prog", std::string(64 * 1024 + 1, 'a')}).dump());
}

TEST(LaunchProgramTest, ErrorShowsTheStartOfTheValue) {
  auto p = Program(R"(["python3", 7])");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr(R"(["python3", 7])"));
  auto long_value = Program("[" + std::string(10000, ' ') + "]");
  ASSERT_FALSE(long_value.ok());
  EXPECT_LT(long_value.status().message().size(), 300u);
}

TEST(LaunchProgramTest, ConfigYamlRoundTrip) {
  auto base = LoadConfigText("", "test");
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  const std::vector<std::string> program = {"python3",         "-c",          "print(\"hi\\n\") # not a comment",
                                            "C:\\dir\\x y",    "it's",        "tab\there",
                                            "line\nbreak",     "caf\u00e9",   "\\\"",
                                            "key: value",      "- dash",      "{a: [b]}"};
  TrainConfig c = base.value();
  c.launch_program = nlohmann::json(program).dump();
  const std::string yaml = ConfigToYaml(c);
  auto back = LoadConfigText(yaml, "round trip");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << yaml;
  EXPECT_EQ(back->launch_program, c.launch_program);
  auto parsed = LaunchProgram(back.value());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, program);
}

// --- SplitProgramArgs -----------------------------------------------------------------

TEST(LaunchSplitProgramArgsTest, WithoutDashDash) {
  std::vector<std::string> args = {"configs/demo.yml", "steps=10"};
  std::vector<std::string> program;
  SplitProgramArgs(&args, &program);
  EXPECT_EQ(args, (std::vector<std::string>{"configs/demo.yml", "steps=10"}));
  EXPECT_TRUE(program.empty());
}

TEST(LaunchSplitProgramArgsTest, WithDashDash) {
  std::vector<std::string> args = {"configs/demo.yml", "num_workers=2", "--", "python3", "train.py", "--lr", "1"};
  std::vector<std::string> program;
  SplitProgramArgs(&args, &program);
  EXPECT_EQ(args, (std::vector<std::string>{"configs/demo.yml", "num_workers=2"}));
  EXPECT_EQ(program, (std::vector<std::string>{"python3", "train.py", "--lr", "1"}));
}

TEST(LaunchSplitProgramArgsTest, DashDashFirstOrLast) {
  std::vector<std::string> args = {"--", "python3", "train.py"};
  std::vector<std::string> program;
  SplitProgramArgs(&args, &program);
  EXPECT_TRUE(args.empty());
  EXPECT_EQ(program, (std::vector<std::string>{"python3", "train.py"}));

  args = {"steps=5", "--"};
  program.clear();
  SplitProgramArgs(&args, &program);
  EXPECT_EQ(args, std::vector<std::string>{"steps=5"});
  EXPECT_TRUE(program.empty());

  args = {"--"};
  SplitProgramArgs(&args, &program);
  EXPECT_TRUE(args.empty());
  EXPECT_TRUE(program.empty());
}

TEST(LaunchSplitProgramArgsTest, ASecondDashDashBelongsToTheProgram) {
  std::vector<std::string> args = {"steps=5", "--", "torchrun", "--nproc-per-node=2", "--", "train.py", "--"};
  std::vector<std::string> program;
  SplitProgramArgs(&args, &program);
  EXPECT_EQ(args, std::vector<std::string>{"steps=5"});
  EXPECT_EQ(program, (std::vector<std::string>{"torchrun", "--nproc-per-node=2", "--", "train.py", "--"}));
}

TEST(LaunchSplitProgramArgsTest, SetLaunchProgramNeedsAProgram) {
  TrainConfig c;
  const Status st = SetLaunchProgram({}, &c);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("--"));
}

}  // namespace
}  // namespace elastrain

namespace elastrain {

// What rank 0 publishes in the rendezvous store reaches the other ranks checked: a value
// that is not address:port (a stale or forged key) is refused, naming the key.
TEST(LaunchMasterAddressTest, PublishedAddressRoundTripsAndGarbageIsRefused) {
  ScopedTempDir dir("master_address");
  const RendezvousAddress rdzv = RendezvousAddress::File(dir.path());
  auto rank0 = MasterAddress::Open(rdzv, 7);
  ASSERT_TRUE(rank0.ok()) << rank0.status().message();
  auto picked = rank0->Pick("127.0.0.1");
  ASSERT_TRUE(picked.ok());
  ASSERT_TRUE(rank0->Publish().ok());
  auto rank1 = MasterAddress::Open(rdzv, 7);
  ASSERT_TRUE(rank1.ok());
  auto got = rank1->Await(5, [] { return true; });
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got.value(), picked.value());

  // Another generation's key holds garbage.
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  const std::string forged = "no-port-here";
  (*store)->set("launch_master_g8", std::vector<char>(forged.begin(), forged.end()));
  auto rank1g8 = MasterAddress::Open(rdzv, 8);
  ASSERT_TRUE(rank1g8.ok());
  auto bad = rank1g8->Await(5, [] { return true; });
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("launch_master_g8"), std::string::npos) << bad.status().message();

  // Nobody publishes generation 9: the wait ends when keep_going says so.
  auto rank1g9 = MasterAddress::Open(rdzv, 9);
  ASSERT_TRUE(rank1g9.ok());
  int looks = 0;
  auto none = rank1g9->Await(30, [&] { return ++looks < 3; });
  EXPECT_FALSE(none.ok());
  EXPECT_EQ(looks, 3);
}

}  // namespace elastrain
