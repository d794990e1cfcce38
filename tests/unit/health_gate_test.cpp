// The health gate (elastic/health_gate.h) without processes: hand-built agents, health
// records and job records; then the same rules through the policy (Decide), where a
// failing host's idle workers are never planned; and the controller's loading of
// elastrain/health/ values as hostile input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "elastic/health_gate.h"
#include "elastic/policy.h"
#include "policy_test_builders.h"

namespace elastrain {
namespace {
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace ::elastrain::policy_test;  // NOLINT: the builders are the tests' vocabulary

AgentInfo CheckingAgent(const std::string& id, const std::string& host, bool checks = true) {
  AgentInfo a;
  a.id = id;
  a.host = host;
  a.slots = 1;
  a.health_checks = checks;
  return a;
}

HealthRecord Healthy(const std::string& host, double checked_at, double gemm = 10, double memory = 5) {
  HealthRecord r;
  r.host = host;
  r.agent = host + "-agent";
  r.healthy = true;
  r.check = "builtin";
  r.checked_at = checked_at;
  r.expires_at = checked_at + 180;
  r.gemm_gflops = gemm;
  r.memory_gbps = memory;
  return r;
}

HealthRecord Failing(const std::string& host, double checked_at, const std::string& reason) {
  HealthRecord r = Healthy(host, checked_at);
  r.healthy = false;
  r.check = "/bin/check-gpu";
  r.reason = reason;
  return r;
}

// ---- the pure gate --------------------------------------------------------------------

TEST(HealthGate, AFailingUnexpiredRecordKeepsTheHostOutAndSaysWhy) {
  const JobRecord rec;
  const auto g = GateHosts({CheckingAgent("a1", "h1"), CheckingAgent("a2", "h2")},
                           {Healthy("h1", kT0 - 10), Failing("h2", kT0 - 10, "ECC errors on GPU 3")}, rec, kT0);
  EXPECT_TRUE(g.Plannable("h1"));
  EXPECT_FALSE(g.Plannable("h2"));
  EXPECT_THAT(g.hosts.at("h2").reason, HasSubstr("ECC errors on GPU 3"));
  EXPECT_THAT(g.hosts.at("h2").reason, HasSubstr("/bin/check-gpu"));
  // The first verdict: unhealthy is an event, healthy is recorded quietly.
  ASSERT_EQ(g.events.size(), 1u);
  EXPECT_EQ(g.events[0].host, "h2");
  EXPECT_FALSE(g.events[0].healthy);
  EXPECT_THAT(g.events[0].reason, HasSubstr("ECC errors on GPU 3"));
  EXPECT_TRUE((g.ask).empty());  // it has a current verdict: nothing to ask
}

TEST(HealthGate, AFailingRecordKeepsOutEvenAnAgentThatRunsNoChecks) {
  const auto g = GateHosts({CheckingAgent("a1", "h1", false)}, {Failing("h1", kT0 - 1, "disk full")}, {}, kT0);
  EXPECT_FALSE(g.Plannable("h1"));
}

TEST(HealthGate, AnExpiredFailingRecordMeansNothingForAnOlderAgent) {
  HealthRecord r = Failing("h1", kT0 - 1000, "disk full");
  r.expires_at = kT0 - 1;
  const auto g = GateHosts({CheckingAgent("a1", "h1", false)}, {r}, {}, kT0);
  EXPECT_TRUE(g.Plannable("h1"));
  EXPECT_FALSE(g.hosts.at("h1").checked);
  EXPECT_TRUE((g.events).empty());
}

TEST(HealthGate, AnOlderAgentWithoutARecordIsPlannedAsBefore) {
  const auto g = GateHosts({CheckingAgent("a1", "h1", false)}, {}, {}, kT0);
  EXPECT_TRUE(g.Plannable("h1"));
  EXPECT_TRUE((g.ask).empty());
}

TEST(HealthGate, ACheckingAgentWithoutACurrentRecordIsKeptOutAndAsked) {
  HealthRecord expired = Healthy("h2", kT0 - 1000);
  expired.expires_at = kT0 - 5;
  const auto g = GateHosts({CheckingAgent("a1", "h1"), CheckingAgent("a2", "h2")}, {expired}, {}, kT0);
  EXPECT_FALSE(g.Plannable("h1"));
  EXPECT_THAT(g.hosts.at("h1").reason, HasSubstr("no health record"));
  EXPECT_FALSE(g.Plannable("h2"));
  EXPECT_THAT(g.hosts.at("h2").reason, HasSubstr("expired"));
  EXPECT_THAT(g.ask, ElementsAre("h1", "h2"));
}

TEST(HealthGate, AsksAgainOnlyAfterTheAskInterval) {
  JobRecord rec;
  rec.health_asked_at["h1"] = kT0 - 1;
  const std::vector<AgentInfo> agents = {CheckingAgent("a1", "h1")};
  EXPECT_TRUE((GateHosts(agents, {}, rec, kT0).ask).empty());
  EXPECT_THAT(GateHosts(agents, {}, rec, kT0 - 1 + kHealthAskSeconds).ask, ElementsAre("h1"));
}

TEST(HealthGate, AHostFarBelowTheMedianFigureIsUnhealthyNamingTheFigures) {
  const std::vector<AgentInfo> agents = {CheckingAgent("a1", "h1"), CheckingAgent("a2", "h2"),
                                         CheckingAgent("a3", "h3"), CheckingAgent("a4", "h4")};
  const auto g = GateHosts(agents,
                           {Healthy("h1", kT0, 10, 5), Healthy("h2", kT0, 11, 5), Healthy("h3", kT0, 9, 5),
                            Healthy("h4", kT0, 3, 5)},
                           {}, kT0);
  EXPECT_TRUE(g.Plannable("h1"));
  EXPECT_TRUE(g.Plannable("h2"));
  EXPECT_TRUE(g.Plannable("h3"));
  EXPECT_FALSE(g.Plannable("h4"));
  EXPECT_THAT(g.hosts.at("h4").reason, HasSubstr("GEMM 3.00 GFLOP/s is 0.32x the median 9.50 of 4 hosts"));
  EXPECT_THAT(g.hosts.at("h4").reason, Not(HasSubstr("memory")));
  ASSERT_EQ(g.events.size(), 1u);
  EXPECT_EQ(g.events[0].host, "h4");
  EXPECT_EQ(g.events[0].gemm_gflops, 3);
}

TEST(HealthGate, SlowMemoryIsNamedToo) {
  const std::vector<AgentInfo> agents = {CheckingAgent("a1", "h1"), CheckingAgent("a2", "h2"),
                                         CheckingAgent("a3", "h3")};
  const auto g = GateHosts(agents, {Healthy("h1", kT0, 10, 8), Healthy("h2", kT0, 10, 8), Healthy("h3", kT0, 10, 2)},
                           {}, kT0);
  EXPECT_FALSE(g.Plannable("h3"));
  EXPECT_THAT(g.hosts.at("h3").reason, HasSubstr("memory copy 2.00 GB/s is 0.25x the median 8.00 of 3 hosts"));
}

TEST(HealthGate, TwoHostsAreNotComparedNorNoiseAboveTheFraction) {
  // Two hosts cannot tell which one is slow.
  const auto two = GateHosts({CheckingAgent("a1", "h1"), CheckingAgent("a2", "h2")},
                             {Healthy("h1", kT0, 10, 5), Healthy("h2", kT0, 2, 1)}, {}, kT0);
  EXPECT_TRUE(two.Plannable("h2"));
  // 0.6x of the median is a shared machine's noise, not a fault.
  const auto noisy =
      GateHosts({CheckingAgent("a1", "h1"), CheckingAgent("a2", "h2"), CheckingAgent("a3", "h3")},
                {Healthy("h1", kT0, 10, 5), Healthy("h2", kT0, 10, 5), Healthy("h3", kT0, 6, 3)}, {}, kT0);
  EXPECT_TRUE(noisy.Plannable("h3"));
}

TEST(HealthGate, VerdictChangesAreEventsAndOnlyChanges) {
  JobRecord rec;
  rec.host_healthy["h1"] = false;
  const std::vector<AgentInfo> agents = {CheckingAgent("a1", "h1")};
  auto g = GateHosts(agents, {Healthy("h1", kT0)}, rec, kT0);
  ASSERT_EQ(g.events.size(), 1u);
  EXPECT_TRUE(g.events[0].healthy);
  EXPECT_EQ(g.events[0].reason, "");
  rec.host_healthy["h1"] = true;
  EXPECT_TRUE((GateHosts(agents, {Healthy("h1", kT0)}, rec, kT0).events).empty());
}

TEST(HealthGate, AnExcludedHostWaitsOutItsCooldownThenANewerPassingCheck) {
  JobRecord rec;
  rec.excluded_at["h1"] = kT0;
  rec.cooldown_until["h1"] = kT0 + 300;
  const std::vector<AgentInfo> agents = {CheckingAgent("a1", "h1")};
  // Cooling down: left to the policy's cool-down rule (a last resort), not asked yet.
  auto g = GateHosts(agents, {Healthy("h1", kT0 - 50)}, rec, kT0 + 100);
  EXPECT_TRUE(g.Plannable("h1"));
  EXPECT_TRUE((g.ask).empty());
  EXPECT_TRUE((g.readmitted).empty());
  // Cool-down over, the passing record is older than the exclusion: asked for a check.
  HealthRecord old = Healthy("h1", kT0 - 50);
  old.expires_at = kT0 + 1000;
  g = GateHosts(agents, {old}, rec, kT0 + 301);
  EXPECT_FALSE(g.Plannable("h1"));
  EXPECT_THAT(g.hosts.at("h1").reason, HasSubstr("waiting for a passing health check newer than the exclusion"));
  EXPECT_THAT(g.ask, ElementsAre("h1"));
  EXPECT_TRUE((g.readmitted).empty());
  // A newer failing check: still out.
  g = GateHosts(agents, {Failing("h1", kT0 + 302, "fan failure")}, rec, kT0 + 303);
  EXPECT_FALSE(g.Plannable("h1"));
  EXPECT_THAT(g.hosts.at("h1").reason, HasSubstr("fan failure"));
  // A newer passing one: re-admitted, with an event saying so.
  g = GateHosts(agents, {Healthy("h1", kT0 + 310)}, rec, kT0 + 311);
  EXPECT_TRUE(g.Plannable("h1"));
  EXPECT_THAT(g.readmitted, ElementsAre("h1"));
  ASSERT_FALSE(g.events.empty());
  EXPECT_THAT(g.events.back().reason, HasSubstr("re-admitted"));
}

TEST(HealthGate, AnExcludedHostOfAnOlderAgentComesBackAfterItsCooldown) {
  JobRecord rec;
  rec.excluded_at["h1"] = kT0;
  rec.cooldown_until["h1"] = kT0 + 300;
  const std::vector<AgentInfo> agents = {CheckingAgent("a1", "h1", false)};
  EXPECT_TRUE(GateHosts(agents, {}, rec, kT0 + 299).readmitted.empty());
  const auto g = GateHosts(agents, {}, rec, kT0 + 301);
  EXPECT_TRUE(g.Plannable("h1"));
  EXPECT_THAT(g.readmitted, ElementsAre("h1"));
}

TEST(HealthGate, ApplyWritesTheRecordAndTheCommands) {
  JobRecord rec;
  rec.excluded_at["h1"] = kT0 - 400;
  rec.cooldown_until["h1"] = kT0 - 100;
  std::vector<AnyEvent> events;
  std::vector<std::pair<std::string, AgentCommand>> commands;
  const std::vector<AgentInfo> agents = {CheckingAgent("a1", "h1"), CheckingAgent("a2", "h2")};
  ApplyHealthGate(agents, {Failing("h2", kT0, "no GPU")}, kT0, "job-1", &rec, &events, &commands);
  ASSERT_EQ(commands.size(), 1u);  // h1 owes a check (h2 has a current verdict)
  EXPECT_EQ(commands[0].first, "a1");
  EXPECT_EQ(commands[0].second.action, CommandAction::kCheckHealth);
  EXPECT_EQ(commands[0].second.job_id, "job-1");
  EXPECT_EQ(rec.health_asked_at.at("h1"), kT0);
  EXPECT_FALSE(rec.host_healthy.at("h2"));
  EXPECT_THAT(rec.host_unplanned.at("h2"), HasSubstr("no GPU"));  // for `status`
  EXPECT_THAT(rec.host_unplanned.at("h1"), HasSubstr("waiting for a passing health check"));
  ASSERT_EQ(events.size(), 2u);  // h1 (no record) and h2 (failing), first seen unhealthy
  // The check comes back passing: h1 is re-admitted and asked no more.
  events.clear();
  commands.clear();
  ApplyHealthGate(agents, {Healthy("h1", kT0 + 1), Failing("h2", kT0, "no GPU")}, kT0 + 2, "job-1", &rec, &events,
                  &commands);
  EXPECT_TRUE((commands).empty());
  EXPECT_FALSE(rec.excluded_at.count("h1"));
  EXPECT_FALSE(rec.health_asked_at.count("h1"));
  EXPECT_TRUE(rec.host_healthy.at("h1"));
  EXPECT_FALSE(rec.host_unplanned.count("h1"));
  EXPECT_TRUE(rec.host_unplanned.count("h2"));
}

// ---- through the policy -----------------------------------------------------------------

TEST(HealthGatePolicy, AFailingHostIsNeverPlannedThenPlannedOnceItPasses) {
  Cluster c;
  c.AddHost("a1", "h1", 2).AddHost("a2", "h2", 2);
  for (AgentInfo& a : c.agents) a.health_checks = true;
  const JobSettings s = Settings(1, 4);
  JobRecord rec;
  rec.job_id = "job-1";
  Observation o = c.Obs(kT0, std::nullopt);
  o.health = {Healthy("h1", kT0 - 1), Failing("h2", kT0 - 1, "nvidia-smi: no devices")};
  Decision d = Decide(rec, o, s);
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_THAT(MemberIds(*d.plan), ElementsAre("a1-w0", "a1-w1"));
  const auto health = FindEvent(d, "host_health");
  ASSERT_TRUE(health) << Names(d);
  EXPECT_EQ(health->fields["host"], "h2");
  EXPECT_EQ(health->fields["healthy"], false);
  EXPECT_THAT(health->fields["reason"].get<std::string>(), HasSubstr("nvidia-smi: no devices"));
  // Not even as a last resort: with min_workers 3 the job waits rather than plan h2.
  JobRecord rec3;
  rec3.job_id = "job-1";
  const Decision waiting = Decide(rec3, o, Settings(3, 4));
  EXPECT_FALSE(waiting.plan) << Names(waiting);
  // Running on h1; h2's check passes: the job grows onto it.
  MarkRunning(c, *d.plan, 5, kT0 + 10);
  Observation o2 = c.Obs(kT0 + 10, d.plan);
  o2.health = {Healthy("h1", kT0 - 1), Healthy("h2", kT0 + 9)};
  const Decision grow = Decide(d.record, o2, s);
  EXPECT_TRUE(FindEvent(grow, "resize_requested")) << Names(grow);
  const auto back = FindEvent(grow, "host_health");
  ASSERT_TRUE(back) << Names(grow);
  EXPECT_EQ(back->fields["healthy"], true);
}

TEST(HealthGatePolicy, HostsWithoutCheckingAgentsArePlannedAsBefore) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  JobRecord rec;
  rec.job_id = "job-1";
  const Decision d = Decide(rec, c.Obs(kT0, std::nullopt), Settings(1, 2));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->world, 2);
  EXPECT_FALSE(FindEvent(d, "host_health"));
}

// ---- the controller's loading --------------------------------------------------------------

TEST(HealthRecordLoad, RefusesMalformedRecordsNamingTheKey) {
  HealthRecord good = Healthy("h1", kT0);
  HealthRecord mismatched = Healthy("h9", kT0);
  HealthRecord backwards = Healthy("h3", kT0);
  backwards.expires_at = kT0 - 1;
  HealthRecord negative = Healthy("h4", kT0, -5, 1);
  HealthRecord long_reason = Failing("h5", kT0, std::string(10000, 'x'));
  const std::vector<KeyValue> kvs = {
      {keys::Health("h1"), ToJson(good)},
      {keys::Health("h2"), ToJson(mismatched)},
      {keys::Health("h3"), ToJson(backwards)},
      {keys::Health("h4"), ToJson(negative)},
      {keys::Health("h5"), ToJson(long_reason)},
      {keys::Health("h6"), "{not json"},
      {keys::Health("h7"), "[1,2]"},
      {keys::Health("h8"), R"({"host":"h8","healthy":"yes"})"},
  };
  std::map<std::string, std::string> refused;
  const std::vector<HealthRecord> loaded = LoadHealthRecords(kvs, &refused);
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[0].host, "h1");
  EXPECT_EQ(loaded[1].host, "h5");
  EXPECT_LE(loaded[1].reason.size(), kMaxHealthReason + 3);
  EXPECT_EQ(refused.size(), 6u);
  EXPECT_THAT(refused.at(keys::Health("h2")), HasSubstr("'h9' is not the key's 'h2'"));
  EXPECT_THAT(refused.at(keys::Health("h3")), HasSubstr("expires_at >= checked_at"));
  EXPECT_THAT(refused.at(keys::Health("h4")), HasSubstr("figures >= 0"));
  EXPECT_THAT(refused.at(keys::Health("h6")), HasSubstr("health record"));
  EXPECT_TRUE(refused.count(keys::Health("h7")));
  EXPECT_TRUE(refused.count(keys::Health("h8")));
  // A refused record's host is unchecked, not healthy: a checking agent there stays out.
  const auto g = GateHosts({CheckingAgent("a2", "h2")}, loaded, {}, kT0);
  EXPECT_FALSE(g.Plannable("h2"));
}

}  // namespace
}  // namespace elastrain
