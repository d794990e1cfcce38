// The agent's state machine (elastic/agent_machine.h), driven without processes, clocks
// or a store: inputs in, actions out.
#include <signal.h>

#include <gtest/gtest.h>

#include "elastic/agent_machine.h"
#include "wire/exit_codes.h"

namespace elastrain {
namespace {

template <typename A>
std::vector<A> All(const std::vector<AgentAction>& acts) {
  std::vector<A> out;
  for (const AgentAction& a : acts)
    if (const A* x = std::get_if<A>(&a)) out.push_back(*x);
  return out;
}

// Messages of type M sent to `worker` among `acts`.
template <typename M>
std::vector<M> Sent(const std::vector<AgentAction>& acts, const std::string& worker) {
  std::vector<M> out;
  for (const SendToWorker& s : All<SendToWorker>(acts))
    if (s.worker == worker)
      if (const M* m = std::get_if<M>(&s.message)) out.push_back(*m);
  return out;
}

// Signals sent to `worker` among `acts`.
std::vector<int> Signals(const std::vector<AgentAction>& acts, const std::string& worker) {
  std::vector<int> out;
  for (const SignalWorker& s : All<SignalWorker>(acts))
    if (s.worker == worker) out.push_back(s.signal);
  return out;
}

ProcessExit Code(int code) { return ProcessExit{false, code}; }
ProcessExit Signal(int sig) { return ProcessExit{true, sig}; }

constexpr double kHeartbeat = 20, kCollective = 30, kNotice = 15;

// One agent "a1" on host "h1" with two slots, and the clock.
class AgentMachineTest : public ::testing::Test {
 protected:
  AgentMachineTest() : m_(Options()) {}
  static AgentMachineOptions Options(bool exit_when_job_ends = false) {
    AgentMachineOptions o;
    o.id = "a1";
    o.host = "h1";
    o.slots = 2;
    o.cores = 8;
    o.exit_when_job_ends = exit_when_job_ends;
    o.store_url = "memory://";
    return o;
  }
  std::vector<AgentAction> Feed(const AgentInput& in) { return m_.Step(in, now_); }
  std::vector<AgentAction> TickAt(double t) {
    now_ = t;
    return Feed(Tick{});
  }
  static JobObserved Job(const std::string& id = "job1", bool terminal = false) {
    JobObserved j;
    j.spec = JobSpec{id, "model_name: tiny\n", "/runs/" + id, 1};
    j.terminal = terminal;
    j.settings = AgentJobSettings{kHeartbeat, kCollective, kNotice, 0};
    return j;
  }
  // Starts job1: both slots spawn (pids 100, 101) and become ready.
  void StartReady() {
    auto acts = Feed(Job());
    auto spawns = All<SpawnWorker>(acts);
    ASSERT_EQ(spawns.size(), 2u);
    for (const SpawnWorker& s : spawns) {
      Feed(WorkerSpawned{s.worker, 100 + s.slot});
      Feed(WorkerSaid{s.worker, ReadyMessage{100 + s.slot, -1}});
    }
  }
  Plan MakePlan(int64_t gen, std::vector<std::string> workers) {
    Plan p;
    p.job_id = "job1";
    p.generation = gen;
    p.world = static_cast<int>(workers.size());
    p.data = p.world;
    p.created_at = now_;
    p.rendezvous = RendezvousAddress::File("/runs/job1/rendezvous/job1");
    for (size_t r = 0; r < workers.size(); ++r)
      p.members.push_back({static_cast<int>(r), workers[r], "a1", "h1", m_.Worker(workers[r])->pid});
    return p;
  }
  const WorkerRecord& W(const std::string& id) {
    const WorkerRecord* w = m_.Worker(id);
    EXPECT_NE(w, nullptr) << id;
    static WorkerRecord none;
    return w ? *w : none;
  }

  AgentMachine m_;
  double now_ = 1000;
};

TEST_F(AgentMachineTest, StartsAWorkerPerSlotAndHandsItTheJob) {
  auto acts = Feed(Job());
  auto spawns = All<SpawnWorker>(acts);
  ASSERT_EQ(spawns.size(), 2u);
  EXPECT_EQ(spawns[0].worker, "a1-w0");
  EXPECT_EQ(spawns[1].worker, "a1-w1");
  EXPECT_EQ(spawns[1].slot, 1);
  EXPECT_EQ(spawns[0].launch.kind, WorkerKind::kElastrainWorker);
  EXPECT_EQ(spawns[0].launch.args, (std::vector<std::string>{"worker", "--channel-fd", "3"}));
  EXPECT_EQ(spawns[0].launch.threads, 4) << "8 cores shared by 2 slots";
  EXPECT_EQ(spawns[0].launch.env.at("OMP_NUM_THREADS"), "4");
  EXPECT_EQ(spawns[0].launch.log_path, "/runs/job1/logs/a1-w0.log");
  EXPECT_EQ(W("a1-w0").phase, WorkerPhase::kStarting);

  acts = Feed(WorkerSpawned{"a1-w0", 100});
  auto jobs = Sent<JobMessage>(acts, "a1-w0");
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].worker_id, "a1-w0");
  EXPECT_EQ(jobs[0].host, "h1");
  EXPECT_EQ(jobs[0].config_yaml, "model_name: tiny\n");
  EXPECT_EQ(W("a1-w0").pid, 100);

  Feed(WorkerSaid{"a1-w0", ReadyMessage{100, 7}});
  EXPECT_EQ(W("a1-w0").phase, WorkerPhase::kIdle);
  EXPECT_EQ(W("a1-w0").state_step, 7);
  // The same job seen again starts nothing.
  EXPECT_TRUE(All<SpawnWorker>(Feed(Job())).empty());
}

TEST_F(AgentMachineTest, AFailedSpawnIsRetriedLater) {
  Feed(Job());
  Feed(SpawnFailed{"a1-w0", "fork: out of memory"});
  EXPECT_EQ(m_.Worker("a1-w0"), nullptr);
  EXPECT_TRUE(All<SpawnWorker>(TickAt(now_ + 1)).empty());
  auto spawns = All<SpawnWorker>(TickAt(now_ + kSpawnRetrySeconds));
  ASSERT_EQ(spawns.size(), 1u);
  EXPECT_EQ(spawns[0].slot, 0);
}

TEST_F(AgentMachineTest, WorkerDeathIsReportedAsFailureAndItsSlotRespawns) {
  StartReady();
  Feed(PlanSeen{MakePlan(0, {"a1-w0", "a1-w1"})});
  Feed(WorkerSaid{"a1-w1", EndedMessage{0, GenerationOutcome::kFailed, 0, 0, 3, -1, false, "boom", -1, {}}});
  now_ += 1;
  Feed(WorkerExited{"a1-w1", Signal(SIGSEGV)});
  const WorkerRecord& r = W("a1-w1");
  EXPECT_EQ(r.phase, WorkerPhase::kExited);
  EXPECT_EQ(r.exit_kind, ExitKind::kFailure);
  EXPECT_EQ(r.exit_signal, SIGSEGV);
  EXPECT_EQ(r.exit_time, now_);
  EXPECT_NE(r.exit_desc.find("was killed by signal 11"), std::string::npos) << r.exit_desc;
  EXPECT_NE(r.exit_desc.find("boom"), std::string::npos) << r.exit_desc;

  // It had become ready, so its slot gets a fresh process at once; the report shows
  // the live workers first, then the exit.
  auto acts = TickAt(now_);
  auto spawns = All<SpawnWorker>(acts);
  ASSERT_EQ(spawns.size(), 1u);
  EXPECT_EQ(spawns[0].slot, 1);
  EXPECT_EQ(spawns[0].worker, "a1-w2");
  auto reports = All<PutReport>(acts);
  ASSERT_EQ(reports.size(), 1u);
  ASSERT_EQ(reports[0].report.workers.size(), 3u);
  EXPECT_EQ(reports[0].report.workers.back().id, "a1-w1");
  EXPECT_EQ(reports[0].report.workers.back().exit_kind, ExitKind::kFailure);
}

TEST_F(AgentMachineTest, AReplacementIsHandedTheHostsMeasuredPeak) {
  // The first workers measured nothing yet: their job messages carry no peak.
  auto acts = Feed(Job());
  ASSERT_EQ(All<SpawnWorker>(acts).size(), 2u);
  acts = Feed(WorkerSpawned{"a1-w0", 100});
  ASSERT_EQ(Sent<JobMessage>(acts, "a1-w0").size(), 1u);
  EXPECT_EQ(Sent<JobMessage>(acts, "a1-w0")[0].peak_flops, 0);
  Feed(WorkerSaid{"a1-w0", ReadyMessage{100, -1, 9e10}});
  Feed(WorkerSpawned{"a1-w1", 101});
  Feed(WorkerSaid{"a1-w1", ReadyMessage{101, -1, 7e10}});
  // A replacement gets the first measurement and need not measure again.
  Feed(WorkerExited{"a1-w1", Signal(SIGKILL)});
  auto spawns = All<SpawnWorker>(TickAt(now_));
  ASSERT_EQ(spawns.size(), 1u);
  acts = Feed(WorkerSpawned{spawns[0].worker, 102});
  auto jobs = Sent<JobMessage>(acts, spawns[0].worker);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].peak_flops, 9e10);
}

TEST_F(AgentMachineTest, AWorkerThatDiesBeforeReadyBacksOff) {
  Feed(Job());
  Feed(WorkerSpawned{"a1-w0", 100});
  Feed(WorkerExited{"a1-w0", Code(kExitBadConfig)});
  EXPECT_EQ(W("a1-w0").exit_kind, ExitKind::kFailure);
  EXPECT_TRUE(All<SpawnWorker>(TickAt(now_ + 0.5)).empty()) << "backs off 1 s";
  EXPECT_EQ(All<SpawnWorker>(TickAt(now_ + 0.6)).size(), 1u);
}

TEST_F(AgentMachineTest, ASilentWorkerIsKilledAsHung) {
  StartReady();
  const double t0 = now_;
  now_ = t0 + kHeartbeat - 1;
  Feed(WorkerSaid{"a1-w1", ProgressMessage{-1, -1, TrainPhase::kIdle, now_, -1, {}, false}});  // w1 keeps talking
  EXPECT_TRUE(All<SignalWorker>(TickAt(t0 + kHeartbeat - 0.5)).empty());
  auto acts = TickAt(t0 + kHeartbeat + 0.5);
  EXPECT_EQ(Signals(acts, "a1-w0"), std::vector<int>{SIGKILL});
  EXPECT_TRUE(Signals(acts, "a1-w1").empty()) << "it sent a tick";
  EXPECT_TRUE(Signals(TickAt(now_ + 0.1), "a1-w0").empty()) << "killed once";
  Feed(WorkerExited{"a1-w0", Signal(SIGKILL)});
  EXPECT_EQ(W("a1-w0").exit_kind, ExitKind::kHung);
  EXPECT_NE(W("a1-w0").exit_desc.find("worker_heartbeat_timeout"), std::string::npos) << W("a1-w0").exit_desc;
}

TEST_F(AgentMachineTest, AWorkerThatNeverGetsReadyIsKilledAsAFailure) {
  Feed(Job());
  Feed(WorkerSpawned{"a1-w0", 100});
  Feed(WorkerSpawned{"a1-w1", 101});
  Feed(WorkerSaid{"a1-w1", ReadyMessage{101, -1}});
  Feed(WorkerSaid{"a1-w0", ProgressMessage{}});  // ticks, but never ready
  auto acts = TickAt(now_ + kStartupTimeoutSeconds + 1);
  EXPECT_EQ(Signals(acts, "a1-w0"), std::vector<int>{SIGKILL});
  Feed(WorkerExited{"a1-w0", Signal(SIGKILL)});
  EXPECT_EQ(W("a1-w0").exit_kind, ExitKind::kFailure);
}

TEST_F(AgentMachineTest, PreemptionForwardsSigtermAndDepartsOnceWorkersLeft) {
  StartReady();
  auto acts = Feed(PreemptionNotice{});
  EXPECT_EQ(Signals(acts, "a1-w0"), std::vector<int>{SIGTERM});
  EXPECT_EQ(Signals(acts, "a1-w1"), std::vector<int>{SIGTERM});
  auto reg = All<UpdateRegistration>(acts);
  ASSERT_EQ(reg.size(), 1u);
  EXPECT_EQ(reg[0].slots, 0);
  EXPECT_TRUE(reg[0].preempting);
  EXPECT_TRUE(m_.preempting());

  Feed(WorkerExited{"a1-w0", Code(kExitPreempted)});
  EXPECT_EQ(W("a1-w0").exit_kind, ExitKind::kPreempted);
  acts = TickAt(now_ + 1);
  EXPECT_TRUE(All<SpawnWorker>(acts).empty()) << "no respawn while preempting";
  EXPECT_TRUE(All<Finish>(acts).empty()) << "a1-w1 has not left yet";
  EXPECT_TRUE(All<PutDeparture>(acts).empty());

  Feed(WorkerExited{"a1-w1", Code(kExitPreempted)});
  acts = TickAt(now_ + 1);
  auto dep = All<PutDeparture>(acts);
  ASSERT_EQ(dep.size(), 1u);
  ASSERT_EQ(dep[0].report.workers.size(), 2u);
  for (const WorkerRecord& w : dep[0].report.workers) EXPECT_EQ(w.exit_kind, ExitKind::kPreempted) << w.id;
  auto fin = All<Finish>(acts);
  ASSERT_EQ(fin.size(), 1u);
  EXPECT_EQ(fin[0].end, AgentEnd::kPreempted);
  EXPECT_TRUE(m_.finished());
  EXPECT_TRUE(m_.Step(Tick{}, now_ + 1).empty()) << "nothing after the end";
}

TEST_F(AgentMachineTest, PreemptionKillsWhatStaysPastTheNotice) {
  StartReady();
  const double t0 = now_;
  Feed(PreemptionNotice{});
  Feed(WorkerExited{"a1-w0", Code(kExitPreempted)});
  EXPECT_TRUE(All<SignalWorker>(TickAt(t0 + kNotice - 1)).empty());
  auto acts = TickAt(t0 + kNotice + 0.1);
  EXPECT_EQ(Signals(acts, "a1-w1"), std::vector<int>{SIGKILL});
  EXPECT_TRUE(All<Finish>(acts).empty()) << "departs once it is gone";
  acts = Feed(WorkerExited{"a1-w1", Signal(SIGKILL)});
  EXPECT_EQ(W("a1-w1").exit_kind, ExitKind::kPreempted);
  EXPECT_NE(W("a1-w1").exit_desc.find("preemption_notice_seconds"), std::string::npos);
  ASSERT_EQ(All<PutDeparture>(acts).size(), 1u);
  ASSERT_EQ(All<Finish>(acts).size(), 1u);
  EXPECT_EQ(All<Finish>(acts)[0].end, AgentEnd::kPreempted);
}

TEST_F(AgentMachineTest, AWorkerPreemptedOnItsOwnTakesItsSlotAway) {
  StartReady();
  auto acts = Feed(WorkerExited{"a1-w1", Code(kExitPreempted)});  // its VM got the notice, not the agent
  EXPECT_EQ(W("a1-w1").exit_kind, ExitKind::kPreempted);
  auto reg = All<UpdateRegistration>(acts);
  ASSERT_EQ(reg.size(), 1u);
  EXPECT_EQ(reg[0].slots, 1);
  EXPECT_FALSE(reg[0].preempting);
  EXPECT_EQ(m_.LiveSlots(), 1);
  EXPECT_TRUE(All<SpawnWorker>(TickAt(now_ + 60)).empty()) << "the capacity is gone";
}

TEST_F(AgentMachineTest, UserStopTellsWorkersToExitThenKillsAfterTheGrace) {
  StartReady();
  const double t0 = now_;
  auto acts = Feed(UserStop{});
  EXPECT_EQ(Sent<ExitMessage>(acts, "a1-w0").size(), 1u);
  EXPECT_EQ(Sent<ExitMessage>(acts, "a1-w1").size(), 1u);
  Feed(WorkerExited{"a1-w0", Code(0)});
  EXPECT_TRUE(All<SpawnWorker>(TickAt(t0 + 1)).empty()) << "no respawn while stopping";
  acts = TickAt(t0 + kShutdownGraceSeconds + 0.1);
  EXPECT_EQ(Signals(acts, "a1-w1"), std::vector<int>{SIGKILL});
  EXPECT_TRUE(All<Finish>(acts).empty());
  acts = Feed(WorkerExited{"a1-w1", Signal(SIGKILL)});
  auto fin = All<Finish>(acts);
  ASSERT_EQ(fin.size(), 1u);
  EXPECT_EQ(fin[0].end, AgentEnd::kStopped);
  EXPECT_TRUE(All<PutDeparture>(acts).empty()) << "a stop is no departure";
}

TEST_F(AgentMachineTest, PlanAssignsIdleWorkersAndKillsAStragglerAfterTheGrace) {
  StartReady();
  Plan p0 = MakePlan(0, {"a1-w0", "a1-w1"});
  p0.restore.kind = RestoreKind::kMemory;
  p0.restore.source_rank = 1;
  p0.restore.step = 40;
  auto acts = Feed(PlanSeen{p0});
  auto a0 = Sent<AssignMessage>(acts, "a1-w0");
  auto a1 = Sent<AssignMessage>(acts, "a1-w1");
  ASSERT_EQ(a0.size(), 1u);
  ASSERT_EQ(a1.size(), 1u);
  EXPECT_EQ(a1[0].rank, 1);
  EXPECT_EQ(a1[0].world, 2);
  EXPECT_EQ(a1[0].restore.kind, RestoreKind::kMemory);
  EXPECT_EQ(a1[0].restore.step, 40);
  EXPECT_EQ(a1[0].members.size(), 2u);
  EXPECT_EQ(W("a1-w1").phase, WorkerPhase::kRunning);
  EXPECT_EQ(W("a1-w1").generation, 0);
  EXPECT_TRUE(All<SendToWorker>(Feed(PlanSeen{p0})).empty()) << "a plan is applied once";

  // w0 ends generation 0; w1 stays in it (stuck in a collective, still ticking).
  Feed(WorkerSaid{"a1-w0", StartedMessage{0, 0, 2}});
  Feed(WorkerSaid{"a1-w1", StartedMessage{0, 1, 2}});
  Feed(WorkerSaid{"a1-w0", EndedMessage{0, GenerationOutcome::kAborted, 0, 40, 45, 45, false, "", -1, {}}});
  EXPECT_EQ(W("a1-w0").phase, WorkerPhase::kIdle);
  EXPECT_EQ(W("a1-w0").outcome, GenerationOutcome::kAborted);

  const double t1 = now_;
  acts = Feed(PlanSeen{MakePlan(1, {"a1-w0"})});
  ASSERT_EQ(Sent<AssignMessage>(acts, "a1-w0").size(), 1u);
  auto aborts = Sent<AbortMessage>(acts, "a1-w1");
  ASSERT_EQ(aborts.size(), 1u) << "the old generation's straggler is told to abort";
  EXPECT_EQ(aborts[0].generation, 0);

  for (double t = t1 + 5; t < t1 + kCollective + kStragglerSlackSeconds; t += 5) {
    now_ = t;
    Feed(WorkerSaid{"a1-w1", ProgressMessage{0, 45, TrainPhase::kTrain, t, -1, {}, false}});
    Feed(WorkerSaid{"a1-w0", ProgressMessage{1, -1, TrainPhase::kSetup, t, -1, {}, false}});
    EXPECT_TRUE(All<SignalWorker>(TickAt(t)).empty()) << "within the grace at +" << t - t1;
  }
  now_ = t1 + kCollective + kStragglerSlackSeconds + 1;
  Feed(WorkerSaid{"a1-w1", ProgressMessage{0, 45, TrainPhase::kTrain, now_, -1, {}, false}});
  Feed(WorkerSaid{"a1-w0", ProgressMessage{1, 46, TrainPhase::kTrain, now_, -1, {}, false}});
  acts = TickAt(now_);
  EXPECT_EQ(Signals(acts, "a1-w1"), std::vector<int>{SIGKILL});
  EXPECT_TRUE(Signals(acts, "a1-w0").empty());
  Feed(WorkerExited{"a1-w1", Signal(SIGKILL)});
  EXPECT_EQ(W("a1-w1").exit_kind, ExitKind::kEnded) << "not a member of generation 1: a straggler, no failure";
  EXPECT_NE(W("a1-w1").exit_desc.find("still in generation 0"), std::string::npos) << W("a1-w1").exit_desc;
}

TEST_F(AgentMachineTest, AMemberStuckInTheOldGenerationIsHung) {
  StartReady();
  Feed(PlanSeen{MakePlan(0, {"a1-w0", "a1-w1"})});
  Feed(WorkerSaid{"a1-w0", StartedMessage{0, 0, 2}});
  Feed(PlanSeen{MakePlan(1, {"a1-w0", "a1-w1"})});
  Feed(WorkerSaid{"a1-w0", StartedMessage{0, 0, 2}});  // late news: still generation 0
  now_ += kCollective + kStragglerSlackSeconds + 1;
  Feed(WorkerSaid{"a1-w0", ProgressMessage{0, 3, TrainPhase::kTrain, now_, -1, {}, false}});
  Feed(WorkerSaid{"a1-w1", ProgressMessage{1, 3, TrainPhase::kTrain, now_, -1, {}, false}});
  EXPECT_EQ(Signals(TickAt(now_), "a1-w0"), std::vector<int>{SIGKILL});
  Feed(WorkerExited{"a1-w0", Signal(SIGKILL)});
  EXPECT_EQ(W("a1-w0").exit_kind, ExitKind::kHung) << "a member of generation 1 that never joined it";
}

TEST_F(AgentMachineTest, GenerationStopReachesItsMembersOnce) {
  StartReady();
  Feed(PlanSeen{MakePlan(0, {"a1-w0", "a1-w1"})});
  auto acts = Feed(StopSeen{GenerationStop{0, kStopUser, false, "job1"}});
  auto stops = Sent<StopMessage>(acts, "a1-w1");
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].reason, kStopUser);
  EXPECT_TRUE(All<SendToWorker>(Feed(StopSeen{GenerationStop{0, kStopUser, false, "job1"}})).empty());
  acts = Feed(StopSeen{GenerationStop{0, kStopUser | kStopResize, true, "job1"}});
  EXPECT_EQ(Sent<AbortMessage>(acts, "a1-w0").size(), 1u);
  stops = Sent<StopMessage>(acts, "a1-w0");
  ASSERT_EQ(stops.size(), 1u) << "only the new reason";
  EXPECT_EQ(stops[0].reason, kStopResize);
}

TEST_F(AgentMachineTest, ChaosKillIsAFailureOfTheProcess) {
  StartReady();
  auto acts = Feed(CommandSeen{AgentCommand{CommandAction::kKill, "a1-w0", now_, "job1"}});
  EXPECT_EQ(Signals(acts, "a1-w0"), std::vector<int>{SIGKILL});
  Feed(WorkerExited{"a1-w0", Signal(SIGKILL)});
  EXPECT_EQ(W("a1-w0").exit_kind, ExitKind::kFailure);
  EXPECT_EQ(All<SpawnWorker>(TickAt(now_)).size(), 1u);
}

TEST_F(AgentMachineTest, ChaosHangStopsTheWorkerWhichIsThenFoundHung) {
  StartReady();
  const double t0 = now_;
  auto acts = Feed(CommandSeen{AgentCommand{CommandAction::kHang, "a1-w1", now_, "job1"}});
  EXPECT_EQ(Signals(acts, "a1-w1"), std::vector<int>{SIGSTOP});
  Feed(WorkerSaid{"a1-w0", ProgressMessage{}});
  now_ = t0 + kHeartbeat + 1;
  Feed(WorkerSaid{"a1-w0", ProgressMessage{}});
  EXPECT_EQ(Signals(TickAt(now_), "a1-w1"), std::vector<int>{SIGKILL});
  Feed(WorkerExited{"a1-w1", Signal(SIGKILL)});
  EXPECT_EQ(W("a1-w1").exit_kind, ExitKind::kHung);
}

TEST_F(AgentMachineTest, ChaosHostKillsTheAgent) {
  StartReady();
  EXPECT_EQ(All<KillHost>(Feed(CommandSeen{AgentCommand{CommandAction::kHost, "", now_, "job1"}})).size(), 1u);
}

TEST_F(AgentMachineTest, ControllerTerminateAndHungSetTheExitKind) {
  StartReady();
  auto acts = Feed(CommandSeen{AgentCommand{CommandAction::kTerminate, "a1-w0", now_, "job1"}});
  EXPECT_EQ(Signals(acts, "a1-w0"), std::vector<int>{SIGKILL});
  acts = Feed(CommandSeen{AgentCommand{CommandAction::kHung, "a1-w1", now_, "job1"}});
  EXPECT_EQ(Signals(acts, "a1-w1"), std::vector<int>{SIGKILL});
  Feed(WorkerExited{"a1-w0", Signal(SIGKILL)});
  Feed(WorkerExited{"a1-w1", Signal(SIGKILL)});
  EXPECT_EQ(W("a1-w0").exit_kind, ExitKind::kEnded);
  EXPECT_NE(W("a1-w0").exit_desc.find("straggler"), std::string::npos);
  EXPECT_EQ(W("a1-w1").exit_kind, ExitKind::kHung);
  EXPECT_NE(W("a1-w1").exit_desc.find("no step progress"), std::string::npos);
  // A command for a worker that is gone does nothing.
  EXPECT_TRUE(Feed(CommandSeen{AgentCommand{CommandAction::kKill, "a1-w0", now_, "job1"}}).empty());
}

// Fencing (elastic/fencing.h): records that do not fit the job are refused, whoever wrote them.
TEST_F(AgentMachineTest, ForgedPlansAreRefusedAndAValidOneStillApplies) {
  StartReady();
  auto assigned = [](const std::vector<AgentAction>& acts) {
    size_t n = 0;
    for (const SendToWorker& s : All<SendToWorker>(acts)) n += std::holds_alternative<AssignMessage>(s.message);
    return n;
  };
  std::vector<Plan> forged;
  forged.push_back(MakePlan(0, {"a1-w0", "a1-w1"}));
  forged.back().rendezvous = RendezvousAddress::Etcd("etcd://10.9.9.9:2379", "elastrain/rdzv/job1");  // attacker's store
  forged.push_back(MakePlan(0, {"a1-w0", "a1-w1"}));
  forged.back().rendezvous = RendezvousAddress::File("/home/someone/.ssh");
  forged.push_back(MakePlan(0, {"a1-w0", "a1-w1"}));
  forged.back().members[1].rank = 0;  // a rank twice
  forged.push_back(MakePlan(0, {"a1-w0", "a1-w1"}));
  forged.back().tensor = 2;  // mesh 2x1x2 for a world of 2
  forged.push_back(MakePlan(0, {"a1-w0", "a1-w1"}));
  forged.back().members[1].worker = "a1-w9";  // not a worker of this agent
  forged.push_back(MakePlan(0, {"a1-w0", "a1-w1"}));
  forged.back().world = 3;  // members do not match
  forged.push_back(MakePlan(0, {"a1-w0", "a1-w1"}));
  forged.back().restore.kind = RestoreKind::kMemory;  // source is not a rank
  forged.back().restore.source_rank = 7;
  forged.back().restore.step = 10;
  for (const Plan& p : forged) {
    EXPECT_EQ(assigned(Feed(PlanSeen{p})), 0u);
    EXPECT_EQ(W("a1-w0").phase, WorkerPhase::kIdle);
  }
  EXPECT_EQ(assigned(Feed(PlanSeen{MakePlan(0, {"a1-w0", "a1-w1"})})), 2u);
  EXPECT_EQ(W("a1-w0").phase, WorkerPhase::kRunning);
}

TEST_F(AgentMachineTest, StopsAndCommandsOfAnotherJobAreIgnored) {
  StartReady();
  Feed(PlanSeen{MakePlan(0, {"a1-w0", "a1-w1"})});
  EXPECT_TRUE(All<SendToWorker>(Feed(StopSeen{GenerationStop{0, kStopUser, true, "job0"}})).empty());
  EXPECT_TRUE(Feed(CommandSeen{AgentCommand{CommandAction::kKill, "a1-w0", now_, "job0"}}).empty());
  EXPECT_TRUE(Feed(CommandSeen{AgentCommand{CommandAction::kKill, "a1-w0", now_, ""}}).empty());
  EXPECT_TRUE(All<KillHost>(Feed(CommandSeen{AgentCommand{CommandAction::kHost, "", now_, "job0"}})).empty());
  EXPECT_EQ(Signals(Feed(CommandSeen{AgentCommand{CommandAction::kKill, "a1-w0", now_, "job1"}}), "a1-w0"),
            std::vector<int>{SIGKILL});
}

// An agent that ends with its job, as `elastrain train` runs one.
AgentMachineOptions EmbeddedAgent(const std::string& id, int slots) {
  AgentMachineOptions o;
  o.id = id;
  o.host = "h1";
  o.slots = slots;
  o.exit_when_job_ends = true;
  return o;
}

TEST(AgentMachineEnd, AnEmbeddedAgentWhoseJobEndedBeforeItStartedEndsToo) {
  AgentMachine m(EmbeddedAgent("local", 2));
  JobObserved j;
  j.spec = JobSpec{"job1", "model_name: tiny\n", "/runs/job1", 1};
  j.terminal = true;  // e.g. FAILED: its run directory was refused
  j.settings = AgentJobSettings{};
  auto acts = m.Step(j, 10);
  EXPECT_TRUE(All<SpawnWorker>(acts).empty());
  ASSERT_EQ(All<Finish>(acts).size(), 1u);
  EXPECT_EQ(All<Finish>(acts)[0].end, AgentEnd::kJobEnded);
}

TEST(AgentMachineEnd, TheJobsEndDrainsItsWorkersAndEndsAnEmbeddedAgent) {
  AgentMachine m(EmbeddedAgent("a1", 1));
  JobObserved job;
  job.spec = JobSpec{"job1", "", "/runs/job1", 1};
  job.settings = AgentJobSettings{};
  m.Step(job, 1);
  m.Step(WorkerSpawned{"a1-w0", 100}, 1);
  m.Step(WorkerSaid{"a1-w0", ReadyMessage{100, -1}}, 1);
  job.terminal = true;
  auto acts = m.Step(job, 2);
  EXPECT_EQ(Sent<ExitMessage>(acts, "a1-w0").size(), 1u);
  EXPECT_TRUE(All<Finish>(acts).empty());
  acts = m.Step(WorkerExited{"a1-w0", ProcessExit{false, 0}}, 3);
  ASSERT_EQ(All<Finish>(acts).size(), 1u);
  EXPECT_EQ(All<Finish>(acts)[0].end, AgentEnd::kJobEnded);
  EXPECT_EQ(m.Worker("a1-w0"), nullptr) << "the ended job's workers are forgotten";
}

TEST(AgentMachineEnd, ANewJobStartsOnceTheOldOnesWorkersLeft) {
  AgentMachineOptions o;
  o.id = "a1";
  o.slots = 1;
  AgentMachine m(o);
  JobObserved job;
  job.spec = JobSpec{"job1", "", "/runs/job1", 1};
  job.settings = AgentJobSettings{};
  m.Step(job, 1);
  m.Step(WorkerSpawned{"a1-w0", 100}, 1);
  job.spec = JobSpec{"job2", "", "/runs/job2", 2};
  auto acts = m.Step(job, 2);
  EXPECT_EQ(Sent<ExitMessage>(acts, "a1-w0").size(), 1u);
  EXPECT_TRUE(All<SpawnWorker>(acts).empty());
  acts = m.Step(WorkerExited{"a1-w0", ProcessExit{false, 0}}, 3);
  auto spawns = All<SpawnWorker>(acts);
  ASSERT_EQ(spawns.size(), 1u);
  EXPECT_EQ(spawns[0].launch.log_path, "/runs/job2/logs/a1-w1.log");
}

TEST_F(AgentMachineTest, ProgressReportsAreRateLimitedStateChangesAreNot) {
  StartReady();
  ASSERT_EQ(All<PutReport>(TickAt(now_)).size(), 1u);
  Feed(ReportWritten{});
  Feed(WorkerSaid{"a1-w0", ProgressMessage{}});
  EXPECT_TRUE(All<PutReport>(TickAt(now_ + 0.1)).empty());
  EXPECT_EQ(All<PutReport>(TickAt(now_ + kProgressReportSeconds)).size(), 1u);
  Feed(ReportWritten{});
  Feed(WorkerSaid{"a1-w0", CheckpointMessage{20, now_}});
  auto reports = All<PutReport>(TickAt(now_ + 0.01));
  ASSERT_EQ(reports.size(), 1u) << "a checkpoint is reported at once";
  EXPECT_EQ(reports[0].report.workers[0].checkpoint_step, 20);
}

}  // namespace
}  // namespace elastrain
