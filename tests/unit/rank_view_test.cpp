// The per-rank view of issue 32: chaos slow/unslow request bodies, the job status with
// each rank's step anatomy and last collective, the hosts' health and the gray-failure
// events (monitor/job_api.h), the status table `elastrain status` prints
// (wire/job_status.h) and the per-rank gauges of /metrics (monitor/prometheus.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/clock.h"
#include "jobctl/job_control.h"
#include "monitor/api_requests.h"
#include "monitor/job_api.h"
#include "monitor/prometheus.h"
#include "store/store.h"
#include "test_dirs.h"
#include "wire/events.h"
#include "wire/job_status.h"
#include "wire/protocol.h"

namespace elastrain {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------- POST /api/v1/chaos
TEST(ApiChaosSlow, SlowTakesAFactorAndSeconds) {
  auto r = ParseChaosRequest(R"({"action": "slow", "rank": 1, "factor": 2.5, "seconds": 30})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->action, "slow");
  EXPECT_EQ(r->rank, 1);
  EXPECT_DOUBLE_EQ(r->factor, 2.5);
  EXPECT_DOUBLE_EQ(r->seconds, 30);
  auto whole = ParseChaosRequest(R"({"action": "slow", "rank": 0, "factor": 100})");
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_DOUBLE_EQ(whole->seconds, 0) << "absent: until unslow";
  auto un = ParseChaosRequest(R"({"action": "unslow", "rank": 3})");
  ASSERT_TRUE(un.ok()) << un.status().message();
  EXPECT_EQ(un->rank, 3);
}

// Issue 37: a preemption notice to one rank, its slot back after `seconds` (0: never).
TEST(ApiChaosSlow, PreemptTakesSecondsAndNoFactor) {
  auto p = ParseChaosRequest(R"({"action": "preempt", "rank": 2, "seconds": 120})");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_DOUBLE_EQ(p->seconds, 120);
  auto never = ParseChaosRequest(R"({"action": "preempt", "rank": 0})");
  ASSERT_TRUE(never.ok()) << never.status().message();
  EXPECT_DOUBLE_EQ(never->seconds, 0);
  for (const char* bad : {R"({"action": "preempt", "rank": 1, "seconds": -1})",
                          R"({"action": "preempt", "rank": 1, "seconds": 1e9})",
                          R"({"action": "preempt", "rank": 1, "factor": 2})"}) {
    auto r = ParseChaosRequest(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ApiChaosSlow, ABadBodyIsRefusedNamingTheField) {
  struct Case {
    std::string body, mentions;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"action": "slow", "rank": 1})", "field 'factor': missing"},
           {R"({"action": "slow", "rank": 1, "factor": 1})", "field 'factor': 1 is out of range"},
           {R"({"action": "slow", "rank": 1, "factor": 0.5})", "field 'factor': 0.5 is out of range"},
           {R"({"action": "slow", "rank": 1, "factor": 100.5})", "field 'factor': 100.5 is out of range"},
           {R"({"action": "slow", "rank": 1, "factor": -2})", "field 'factor': -2 is out of range"},
           {R"({"action": "slow", "rank": 1, "factor": null})", "field 'factor'"},
           {R"({"action": "slow", "rank": 1, "factor": "2"})", "'factor': expected a number, got a string"},
           {R"({"action": "slow", "rank": 1, "factor": 2, "seconds": -1})", "field 'seconds': -1 is out of range"},
           {R"({"action": "slow", "rank": 1, "factor": 2, "seconds": 1e9})", "field 'seconds': 1000000000 is out of range"},
           {R"({"action": "slow", "rank": 1, "factor": 2, "seconds": "5"})", "'seconds': expected a number"},
           {R"({"action": "kill", "rank": 1, "factor": 2})", "field 'factor': only slow takes a factor"},
           {R"({"action": "unslow", "rank": 1, "seconds": 3})", "field 'seconds': only slow and preempt take seconds"},
           {R"({"action": "terminate", "rank": 1})", "field 'action': 'terminate' is not a chaos action"},
           {R"({"action": "check_health", "rank": 1})", "field 'action': 'check_health' is not a chaos action"},
           {R"({"action": "slow", "rank": 1, "factor": 2, "speed": 3})", "field 'speed': unknown"},
       }) {
    auto p = ParseChaosRequest(c.body);
    ASSERT_FALSE(p.ok()) << c.body;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_NE(p.status().message().find(c.mentions), std::string::npos) << c.body << ": " << p.status().message();
  }
}

// A job in a memory store: spec, record, a plan of `world` ranks on hosts h0, h1, ...,
// and one agent per rank reporting its worker.
struct StoreJob {
  std::shared_ptr<Store> store = MakeMemoryStore();
  ScopedTempDir dir{"rank_view"};
  JobRecord record;
  Plan plan;
  std::vector<AgentReport> reports;

  explicit StoreJob(int world) {
    JobSpec spec{"job1", "model_name: tiny\n", dir.path(), WallSeconds()};
    EXPECT_TRUE(store->Put(keys::JobSpec(), ToJson(spec)).ok());
    record.job_id = "job1";
    record.state = JobState::kRunning;
    record.generation = 2;
    record.world = world;
    plan.job_id = "job1";
    plan.generation = 2;
    plan.world = world;
    plan.rendezvous = RendezvousAddress::File(dir.path() + "/rendezvous");
    for (int r = 0; r < world; ++r) {
      const std::string agent = "a" + std::to_string(r), host = "h" + std::to_string(r);
      plan.members.push_back({r, agent + "-w0", agent, host, 100 + r});
      AgentInfo info;
      info.id = agent;
      info.host = host;
      info.slots = 1;
      EXPECT_TRUE(store->Put(keys::Agent(agent), ToJson(info)).ok());
      AgentReport rep;
      rep.agent = agent;
      WorkerRecord w;
      w.id = agent + "-w0";
      w.pid = 100 + r;
      w.phase = WorkerPhase::kRunning;
      w.train_phase = TrainPhase::kTrain;
      w.generation = 2;
      w.rank = r;
      w.step = 40 + r;
      rep.workers.push_back(w);
      reports.push_back(rep);
    }
  }
  WorkerRecord& Worker(int rank) { return reports[rank].workers[0]; }
  json Status() {
    EXPECT_TRUE(store->Put(keys::JobRecord(), ToJson(record)).ok());
    EXPECT_TRUE(store->Put(keys::JobPlan(), ToJson(plan)).ok());
    for (const AgentReport& r : reports) EXPECT_TRUE(store->Put(keys::Report(r.agent), ToJson(r)).ok());
    auto j = JobStatusJson(*store);
    EXPECT_TRUE(j.ok()) << j.status().message();
    return j.ok() ? j.value() : json::object();
  }
};

// The leading head (issue 36) from keys::Head(); a record there that does not parse (any
// store writer) shows no leader and does not fail the status.
TEST(RankStatus, TheLeaderComesFromTheHeadKeyAndAHostileOneIsIgnored) {
  StoreJob job(1);
  HeadRecord head;
  head.id = "h2:4242";
  head.url = "http://10.0.0.2:8080";
  ASSERT_TRUE(job.store->Put(keys::Head(), ToJson(head)).ok());
  json j = job.Status();
  EXPECT_EQ(j["leader"], "h2:4242");
  EXPECT_EQ(j["leader_url"], "http://10.0.0.2:8080");
  for (const char* hostile : {"not json", "[1,2]", "{\"id\": 12, \"pid\": \"x\"}", "{\"pid\": 1e300}"}) {
    ASSERT_TRUE(job.store->Put(keys::Head(), hostile).ok());
    j = job.Status();
    EXPECT_EQ(j["leader"], "") << hostile;
  }
}

TEST(RankStatus, EachRankCarriesItsAnatomyAndLastCollective) {
  StoreJob job(3);
  for (int r = 0; r < 3; ++r) {
    job.Worker(r).compute_seconds = r == 1 ? 0.2 : 0.1;
    job.Worker(r).wait_seconds = r == 1 ? 0.01 : 0.11;
    job.Worker(r).timed_steps = 5;
    job.Worker(r).collective_seq = 120 + r;
    job.Worker(r).collective_kind = "allreduce";
    job.Worker(r).in_collective = r != 1;
  }
  job.Worker(2).generation = 1;  // its figures are of an older generation: not shown
  job.record.stragglers["a1-w0"] = StragglerTrack{2, 30, 40, true, 2.0, 0, "h1"};
  job.record.stragglers["a0-w0"] = StragglerTrack{1, 10, 20, true, 3.0, 0, "h0"};  // another generation's
  json st = job.Status();
  ASSERT_EQ(st["ranks"].size(), 3u) << st.dump();
  const json& r1 = st["ranks"][1];
  EXPECT_EQ(r1["host"], "h1");
  EXPECT_DOUBLE_EQ(r1["compute_seconds"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(r1["wait_seconds"].get<double>(), 0.01);
  EXPECT_EQ(r1["timed_steps"], 5);
  EXPECT_EQ(r1["collective_seq"], 121);
  EXPECT_EQ(r1["collective_kind"], "allreduce");
  EXPECT_EQ(r1["in_collective"], false);
  EXPECT_EQ(r1["straggler"], true);
  EXPECT_DOUBLE_EQ(r1["slowdown"].get<double>(), 2.0);
  EXPECT_EQ(st["ranks"][0]["straggler"], false);
  EXPECT_EQ(st["ranks"][0]["in_collective"], true);
  EXPECT_EQ(st["ranks"][2]["timed_steps"], 0);
  EXPECT_EQ(st["ranks"][2]["collective_seq"], -1);
  auto back = JobStatusFromJson(st, "status");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ranks[1].collective_kind, "allreduce");
  EXPECT_TRUE(back->ranks[1].straggler);
}

TEST(RankStatus, HostsShowTheirHealthAndExclusionAndABadRecordIsNotTrusted) {
  StoreJob job(2);
  const double now = WallSeconds();
  HealthRecord ok{"h0", "a0", true, "builtin", "", now - 5, now + 600, 50, 10};
  HealthRecord bad{"h1", "a1", false, "/bin/check-gpu", "ECC errors: 12", now - 5, now + 600, 0, 0};
  HealthRecord old{"h2", "a2", true, "builtin", "", now - 900, now - 300, 0, 0};
  ASSERT_TRUE(job.store->Put(keys::Health("h0"), ToJson(ok)).ok());
  ASSERT_TRUE(job.store->Put(keys::Health("h1"), ToJson(bad)).ok());
  ASSERT_TRUE(job.store->Put(keys::Health("h2"), ToJson(old)).ok());
  ASSERT_TRUE(job.store->Put(keys::Health("h3"), R"({"host": "h3", "healthy": "yes"})").ok());
  job.record.excluded_at["h4"] = now - 10;
  job.record.cooldown_until["h4"] = now + 290;
  json st = job.Status();
  auto s = JobStatusFromJson(st, "status");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->hosts.size(), 5u) << st["hosts"].dump();
  EXPECT_EQ(s->hosts[0].health, "healthy");
  EXPECT_EQ(s->hosts[1].health, "unhealthy");
  EXPECT_EQ(s->hosts[1].reason, "ECC errors: 12");
  EXPECT_EQ(s->hosts[1].check, "/bin/check-gpu");
  EXPECT_EQ(s->hosts[2].health, "expired");
  EXPECT_EQ(s->hosts[3].health, "unreadable");
  EXPECT_NE(s->hosts[3].reason.find("healthy"), std::string::npos) << s->hosts[3].reason;
  EXPECT_EQ(s->hosts[4].host, "h4");
  EXPECT_DOUBLE_EQ(s->hosts[4].excluded_until, now + 290);
}

TEST(RankStatus, GrayEventsAreTheNewestOfTheirKindsInALine) {
  StoreJob job(2);
  {
    std::ofstream out(job.dir.path() + "/events.jsonl");
    StragglerDetectedEvent d;
    d.generation = 2;
    d.rank = 1;
    d.host = "h1";
    d.slowdown = 2.04;
    d.compute_seconds = 0.204;
    d.median_compute_seconds = 0.1;
    d.since_step = 40;
    d.policy = "exclude";
    HostExcludedEvent x;
    x.host = "h1";
    x.reason = "straggler 2.04x";
    x.expected_gain_seconds = 120;
    x.replan_cost_seconds = 0.4;
    HangDiagnosedEvent h;
    h.generation = 3;
    h.trigger = "silent_rank";
    h.behind = {1};
    h.hosts = {"h1"};
    CheckpointSavedEvent c;
    out << EncodeEvent(c, 99).dump() << "\n";
    out << EncodeEvent(d, 100).dump() << "\n";
    out << R"({"event": "straggler_detected", "rank": "one"})" << "\n";  // a damaged line: skipped
    out << EncodeEvent(x, 101).dump() << "\n";
    out << EncodeEvent(h, 102).dump() << "\n";
    out << R"({"event": "hang_diagn)";  // torn
  }
  json st = job.Status();
  auto s = JobStatusFromJson(st, "status");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->gray_events.size(), 3u) << st["gray_events"].dump();
  EXPECT_EQ(s->gray_events[0].event, "straggler_detected");
  EXPECT_NE(s->gray_events[0].detail.find("rank 1 on h1: 2.04x"), std::string::npos) << s->gray_events[0].detail;
  EXPECT_NE(s->gray_events[0].detail.find("since step 40"), std::string::npos);
  EXPECT_EQ(s->gray_events[1].event, "host_excluded");
  EXPECT_EQ(s->gray_events[2].event, "hang_diagnosed");
  EXPECT_NE(s->gray_events[2].detail.find("rank(s) 1 behind on h1"), std::string::npos) << s->gray_events[2].detail;
  EXPECT_EQ(GrayEvents(job.dir.path(), 1).size(), 1u);
  EXPECT_TRUE(GrayEvents(job.dir.path() + "/nowhere", 10).empty());
}

// ---------------------------------------------------------------- elastrain status
JobStatus ThreeRanks() {
  JobStatus s;
  s.job = "job1";
  s.state = JobState::kRunning;
  s.generation = 2;
  s.world = 3;
  s.step = 45;
  s.steps = 100;
  s.time = 1000;
  for (int r = 0; r < 3; ++r) {
    JobStatusRank k;
    k.rank = r;
    k.host = "host" + std::to_string(r);
    k.worker = "a" + std::to_string(r) + "-w0";
    k.step = 45;
    k.phase = "train";
    k.compute_seconds = r == 2 ? 0.25 : 0.125;
    k.wait_seconds = r == 2 ? 0.002 : 0.127;
    k.timed_steps = 5;
    k.collective_seq = 300;
    k.collective_kind = "allreduce";
    k.in_collective = r != 2;
    s.ranks.push_back(k);
  }
  return s;
}

// The table's line of rank `r`.
std::string RankLine(const std::string& text, int r) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("  " + std::to_string(r) + " ", 0) == 0) return line;
  return "";
}

TEST(JobStatusFormat, APerRankTableWithComputeWaitAndLastCollective) {
  JobStatus s = ThreeRanks();
  s.ranks[2].straggler = true;
  s.ranks[2].slowdown = 2.0;
  const std::string text = FormatJobStatus(s);
  EXPECT_NE(text.find("RANK  HOST"), std::string::npos) << text;
  EXPECT_NE(text.find("COMPUTE_S"), std::string::npos) << text;
  EXPECT_NE(text.find("WAIT_S"), std::string::npos);
  EXPECT_NE(text.find("LAST_COLLECTIVE"), std::string::npos);
  const std::string r0 = RankLine(text, 0), r2 = RankLine(text, 2);
  EXPECT_NE(r0.find("host0"), std::string::npos) << text;
  EXPECT_NE(r0.find("0.125"), std::string::npos) << r0;
  EXPECT_NE(r0.find("0.127"), std::string::npos) << r0;
  EXPECT_NE(r0.find("#300 allreduce (inside)"), std::string::npos) << r0;
  EXPECT_EQ(r0.find("STRAGGLER"), std::string::npos) << r0;
  EXPECT_NE(r2.find("0.250"), std::string::npos) << r2;
  EXPECT_NE(r2.find("#300 allreduce "), std::string::npos) << r2;
  EXPECT_EQ(r2.find("(inside)"), std::string::npos) << r2;
  EXPECT_NE(r2.find("STRAGGLER 2.00x"), std::string::npos) << r2;
  // The columns line up: every rank's compute figure starts where the header's column does.
  const size_t col = text.find("COMPUTE_S") - text.rfind('\n', text.find("COMPUTE_S")) - 1;
  EXPECT_EQ(r0.substr(col, 9), "    0.125") << text;
}

// Issue 34: "latest checkpoint step -1" and "step 355 of 200" (the trainer's default
// steps) for a launched program that reports its own; unknown for one that reports none.
TEST(JobStatusFormat, CheckpointAndStepLinesSayWhatIsKnown) {
  JobStatus s = ThreeRanks();
  s.steps = 200;
  s.step = 30;
  s.latest_checkpoint_step = 20;
  EXPECT_NE(FormatJobStatus(s).find("step 30 of 200\n"), std::string::npos) << FormatJobStatus(s);
  EXPECT_NE(FormatJobStatus(s).find("restarts 0, latest checkpoint step 20\n"), std::string::npos) << FormatJobStatus(s);
  s.latest_checkpoint_step = -1;
  EXPECT_NE(FormatJobStatus(s).find("restarts 0, no checkpoint yet\n"), std::string::npos) << FormatJobStatus(s);
  s.launched = true;
  s.step = 355;
  std::string text = FormatJobStatus(s);
  EXPECT_NE(text.find("step 355 (reported by the program)"), std::string::npos) << text;
  EXPECT_EQ(text.find("of 200"), std::string::npos) << text;
  EXPECT_NE(text.find("no checkpoint reported by the program"), std::string::npos) << text;
  s.step = 0;
  text = FormatJobStatus(s);
  EXPECT_NE(text.find("no step reported by the program"), std::string::npos) << text;
  EXPECT_NE(text.find("elastrain_worker does, docs/launch.md"), std::string::npos) << text;
  EXPECT_EQ(text.find("-1"), std::string::npos) << text;
}

TEST(JobStatusFormat, AnUntimedRankShowsDashesAndNoHostsOrEventsNoSections) {
  JobStatus s = ThreeRanks();
  s.ranks[1].timed_steps = 0;
  s.ranks[1].collective_seq = -1;
  const std::string text = FormatJobStatus(s);
  const std::string r1 = RankLine(text, 1);
  EXPECT_EQ(r1.find("0.125"), std::string::npos) << r1;
  EXPECT_NE(r1.find(" -  "), std::string::npos) << r1;
  EXPECT_EQ(text.find("hosts:"), std::string::npos);
  EXPECT_EQ(text.find("gray failures:"), std::string::npos);
}

TEST(JobStatusFormat, HostsHealthExclusionAndGrayEvents) {
  JobStatus s = ThreeRanks();
  s.hosts.push_back({"host1", "unhealthy", "/bin/check", "GPU 3 fell off the bus", 990, 1590, 0});
  s.hosts.push_back({"host2", "healthy", "builtin", "", 990, 1590, 1300});
  s.hosts.push_back({"host3", "healthy", "builtin", "", 990, 1590, 900});  // its exclusion ended
  s.gray_events.push_back({995, "straggler_detected", "rank 2 on host2: 2.00x the median compute"});
  const std::string text = FormatJobStatus(s);
  EXPECT_NE(text.find("host1            unhealthy (/bin/check check at 00:16:30): GPU 3 fell off the bus"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("host2            healthy (builtin check at 00:16:30); EXCLUDED until 00:21:40 UTC"),
            std::string::npos)
      << text;
  const size_t h3 = text.find("host3");
  ASSERT_NE(h3, std::string::npos);
  EXPECT_EQ(text.substr(h3, text.find('\n', h3) - h3).find("EXCLUDED"), std::string::npos);
  EXPECT_NE(text.find("gray failures:\n    00:16:35 straggler_detected  rank 2 on host2"), std::string::npos) << text;
}

// ---------------------------------------------------------------- /metrics
std::string Promtool() {
  for (const char* p : {"/usr/bin/promtool", "/usr/local/bin/promtool"})
    if (std::ifstream(p).good()) return p;
  return "";
}

TEST(PrometheusRanks, GaugesPerRankLabelledByRankAndHost) {
  JobStatus s = ThreeRanks();
  s.ranks[2].straggler = true;
  s.ranks[1].host = "h\"q";  // a label value that needs escaping
  s.hosts.push_back({"host1", "unhealthy", "builtin", "slow GEMM", 990, 1590, 0});
  s.hosts.push_back({"host2", "healthy", "builtin", "", 990, 1590, 1300});
  s.hosts.push_back({"host4", "unchecked", "", "", 0, 0, 1300});  // excluded, never checked
  const std::string text = RenderPrometheus(ToJsonValue(s), RunSnapshot());
  EXPECT_NE(text.find("# TYPE elastrain_rank_compute_seconds gauge\n"), std::string::npos) << text;
  EXPECT_NE(text.find("elastrain_rank_compute_seconds{rank=\"0\",host=\"host0\"} 0.125\n"), std::string::npos) << text;
  EXPECT_NE(text.find("elastrain_rank_compute_seconds{rank=\"2\",host=\"host2\"} 0.25\n"), std::string::npos);
  EXPECT_NE(text.find("elastrain_rank_wait_seconds{rank=\"1\",host=\"h\\\"q\"} 0.127\n"), std::string::npos) << text;
  EXPECT_NE(text.find("elastrain_rank_timed_steps{rank=\"0\",host=\"host0\"} 5\n"), std::string::npos);
  EXPECT_NE(text.find("elastrain_rank_step{rank=\"2\",host=\"host2\"} 45\n"), std::string::npos);
  EXPECT_NE(text.find("elastrain_rank_collective_seq{rank=\"0\",host=\"host0\"} 300\n"), std::string::npos);
  EXPECT_NE(text.find("elastrain_rank_in_collective{rank=\"0\",host=\"host0\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("elastrain_rank_in_collective{rank=\"2\",host=\"host2\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("elastrain_rank_straggler{rank=\"2\",host=\"host2\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("elastrain_rank_straggler{rank=\"0\",host=\"host0\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("elastrain_host_healthy{host=\"host1\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("elastrain_host_healthy{host=\"host2\"} 1\n"), std::string::npos);
  EXPECT_EQ(text.find("elastrain_host_healthy{host=\"host4\"}"), std::string::npos) << "no record, no gauge";
  EXPECT_NE(text.find("elastrain_host_excluded_until_seconds{host=\"host4\"} 1300\n"), std::string::npos);

  const std::string promtool = Promtool();
  if (promtool.empty()) GTEST_SKIP() << "no promtool here: the exposition's syntax is checked by test_observability";
  ScopedTempDir dir("rank_metrics");
  const std::string file = dir.path() + "/metrics.txt";
  std::ofstream(file) << text;
  const std::string cmd = promtool + " check metrics < " + file + " > " + dir.path() + "/lint.txt 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream lint(dir.path() + "/lint.txt");
  std::string why((std::istreambuf_iterator<char>(lint)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << "promtool check metrics: " << why;
}

TEST(PrometheusRanks, NoRanksNoSamplesButTheFamiliesStay) {
  const std::string text = RenderPrometheus(json::object(), RunSnapshot());
  EXPECT_NE(text.find("# TYPE elastrain_rank_compute_seconds gauge\n"), std::string::npos);
  EXPECT_EQ(text.find("elastrain_rank_compute_seconds{"), std::string::npos);
  // A rank entry of another shape is skipped, not fatal.
  const std::string odd = RenderPrometheus({{"job", "j"}, {"ranks", {1, "x", {{"rank", "two"}}}}}, RunSnapshot());
  EXPECT_NE(odd.find("elastrain_rank_step{rank=\"-1\",host=\"\"} -1\n"), std::string::npos) << odd;
}

}  // namespace
}  // namespace elastrain
