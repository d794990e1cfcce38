// The launched worker's state machine (launch/launch_machine.h), driven without
// processes, clocks, channels or a store: inputs in, actions out. The harness answers
// the actions that have answers (a program starts with pid 100 + its id, rank 0's address
// resolves, a publish succeeds) as the executor does, at once and in order, unless a test
// scripts another answer.
#include <signal.h>

#include <gtest/gtest.h>

#include "launch/launch_machine.h"
#include "wire/exit_codes.h"

namespace elastrain::launch {
namespace {

// A step report with only its number.
ProgramStep Step(int64_t n) {
  ProgramStep s;
  s.step = n;
  return s;
}

using Actions = std::vector<LaunchAction>;

template <typename A>
std::vector<A> All(const Actions& acts) {
  std::vector<A> out;
  for (const LaunchAction& a : acts)
    if (const A* x = std::get_if<A>(&a)) out.push_back(*x);
  return out;
}

// Messages of type M sent to the agent among `acts`.
template <typename M>
std::vector<M> Sent(const Actions& acts) {
  std::vector<M> out;
  for (const SendToAgent& s : All<SendToAgent>(acts))
    if (const M* m = std::get_if<M>(&s.message)) out.push_back(*m);
  return out;
}

// The signals sent to programs (by pid), then to the group (pid 0).
std::vector<std::pair<int, int>> Signals(const Actions& acts) {
  std::vector<std::pair<int, int>> out;
  for (const LaunchAction& a : acts) {
    if (const auto* s = std::get_if<SignalProgram>(&a)) out.push_back({s->pid, s->signal});
    if (const auto* s = std::get_if<SignalGroup>(&a)) out.push_back({0, s->signal});
  }
  return out;
}

// Where action of type A first comes in `acts` (-1: not there).
template <typename A>
int IndexOf(const Actions& acts) {
  for (size_t i = 0; i < acts.size(); ++i)
    if (std::holds_alternative<A>(acts[i])) return static_cast<int>(i);
  return -1;
}

ProcessExit Code(int code) { return ProcessExit{false, code}; }
ProcessExit Killed(int sig) { return ProcessExit{true, sig}; }

constexpr double kNotice = 20;

class LaunchMachineTest : public ::testing::Test {
 protected:
  static LaunchMachineOptions Options() {
    LaunchMachineOptions o;
    o.worker_id = "a1-w0";
    o.program = "train.py";
    o.run_dir = "/runs/demo";
    o.run_id = "demo";
    o.threads = 4;
    o.preemption_notice_seconds = kNotice;
    o.collective_timeout = 30;
    o.log_period = 10;
    o.checkpoint_period = 50;
    return o;
  }
  void Make(const LaunchMachineOptions& o) { m_.emplace(o); }
  LaunchMachine& M() {
    if (!m_) m_.emplace(Options());
    return *m_;
  }

  // Steps `in` and answers as the executor would; every action, nested answers included.
  Actions Feed(const LaunchInput& in) {
    Actions all;
    for (const LaunchAction& a : M().Step(in, now_)) {
      all.push_back(a);
      if (auto answer = Answer(a)) {
        Actions more = Feed(*answer);
        all.insert(all.end(), more.begin(), more.end());
      }
    }
    return all;
  }
  std::optional<LaunchInput> Answer(const LaunchAction& a) {
    if (const auto* s = std::get_if<StartProgram>(&a)) {
      if (!start_error_.ok()) return ProgramStartFailed{s->program, start_error_};
      last_pid_ = 100 + s->program;
      if (s->spare) spare_pid_ = last_pid_;
      return ProgramStarted{s->program, last_pid_};
    }
    if (const auto* r = std::get_if<ResolveMaster>(&a)) {
      resolved_rank_ = r->rank;
      if (hold_master_) return std::nullopt;  // the test answers itself
      return MasterResolved{r->generation, master_status_, "10.0.0.1", 29500};
    }
    if (const auto* p = std::get_if<PublishMaster>(&a)) return MasterPublished{p->generation, publish_error_};
    if (const auto* s = std::get_if<AssignSpare>(&a)) return SpareAssigned{s->program, spare_assign_error_};
    if (const auto* p = std::get_if<ProbeListening>(&a)) return ListenProbed{p->generation, listening_, true};
    return std::nullopt;
  }

  Actions Assign(int64_t generation, int rank, int world = 2) {
    AssignMessage a;
    a.generation = generation;
    a.rank = rank;
    a.world = world;
    for (int r = 0; r < world; ++r) a.members.push_back({r, r == 0 ? "h0" : "h1", 0});
    a.rendezvous = RendezvousAddress::File("/runs/demo/rdzv");
    return Feed(AgentSaid{a});
  }
  Actions At(double t, const LaunchInput& in) {
    now_ = t;
    return Feed(in);
  }
  Actions TickAt(double t) { return At(t, Tick{}); }
  Actions Exited(int pid, ProcessExit e) { return Feed(ProcessReaped{pid, e}); }
  int ProgramId(int pid) const { return pid - 100; }
  Actions Say(int pid, const ProgramMessage& msg) { return Feed(ProgramSaid{ProgramId(pid), msg}); }

  std::optional<LaunchMachine> m_;
  double now_ = 1000;
  int last_pid_ = -1, spare_pid_ = -1, resolved_rank_ = -1;
  Status start_error_ = Status::OK();
  Status master_status_ = Status::OK();
  Status spare_assign_error_ = Status::OK();
  Status publish_error_ = Status::OK();
  bool hold_master_ = false;
  bool listening_ = false;
};

// ---------------------------------------------------------------- begin
TEST_F(LaunchMachineTest, BeginSaysReadyAndStartsNoSpareWithoutWarmSpares) {
  Actions a = Feed(Begin{4242});
  ASSERT_EQ(Sent<ReadyMessage>(a).size(), 1u);
  EXPECT_EQ(Sent<ReadyMessage>(a)[0].pid, 4242);
  EXPECT_TRUE(All<StartProgram>(a).empty());
  EXPECT_EQ(M().state(), LaunchState::kIdle);
}

TEST_F(LaunchMachineTest, BeginStartsAWarmSpareWithoutItsRank) {
  LaunchMachineOptions o = Options();
  o.warm_spares = true;
  Make(o);
  Actions a = Feed(Begin{1});
  ASSERT_EQ(All<StartProgram>(a).size(), 1u);
  const StartProgram s = All<StartProgram>(a)[0];
  EXPECT_TRUE(s.spare);
  EXPECT_EQ(s.env.at("ELASTRAIN_WORKER_ID"), "a1-w0");
  EXPECT_EQ(s.env.at("OMP_NUM_THREADS"), "4");
  EXPECT_EQ(s.env.count("RANK"), 0u);
}

// ---------------------------------------------------------------- generations
TEST_F(LaunchMachineTest, NewGenerationStartsTheProgramWithItsRankEnvironment) {
  Feed(Begin{1});
  Actions a = Assign(3, 1);
  ASSERT_EQ(Sent<StartedMessage>(a).size(), 1u);
  EXPECT_EQ(Sent<StartedMessage>(a)[0].generation, 3);
  ASSERT_EQ(All<ResolveMaster>(a).size(), 1u);
  EXPECT_EQ(All<ResolveMaster>(a)[0].timeout_seconds, 30);
  EXPECT_EQ(All<ResolveMaster>(a)[0].address, "127.0.0.1");  // no address given
  EXPECT_TRUE(All<PublishMaster>(a).empty());                 // only rank 0 publishes
  ASSERT_EQ(All<StartProgram>(a).size(), 1u);
  const StartProgram s = All<StartProgram>(a)[0];
  EXPECT_FALSE(s.spare);
  EXPECT_EQ(s.env.at("RANK"), "1");
  EXPECT_EQ(s.env.at("WORLD_SIZE"), "2");
  EXPECT_EQ(s.env.at("MASTER_ADDR"), "10.0.0.1");
  EXPECT_EQ(s.env.at("MASTER_PORT"), "29500");
  EXPECT_EQ(s.env.at("TORCHELASTIC_RESTART_COUNT"), "3");
  ASSERT_EQ(All<TellProgram>(a).size(), 1u);  // the checkpoint period, no stop
  EXPECT_FALSE(All<TellProgram>(a)[0].control.stop);
  EXPECT_EQ(All<TellProgram>(a)[0].control.checkpoint_period, 50);
  EXPECT_TRUE(All<OpenRunLogs>(a).empty());  // rank 1 writes no run logs
  EXPECT_EQ(M().state(), LaunchState::kRunning);
}

TEST_F(LaunchMachineTest, ColdRankZeroPublishesBeforeItsProgramStartsAndOpensTheLogsOnce) {
  Actions a = Assign(0, 0);
  ASSERT_GE(IndexOf<PublishMaster>(a), 0);
  EXPECT_LT(IndexOf<PublishMaster>(a), IndexOf<StartProgram>(a));
  EXPECT_EQ(All<OpenRunLogs>(a).size(), 1u);
  Exited(last_pid_, Code(0));
  Actions b = Assign(1, 0);
  EXPECT_EQ(All<StartProgram>(b).size(), 1u);
  EXPECT_TRUE(All<OpenRunLogs>(b).empty());
}

TEST_F(LaunchMachineTest, ResizeKillsTheOldProgramAndStartsTheNewGenerationOnceItExited) {
  Assign(1, 1);
  const int old = last_pid_;
  Actions a = Assign(2, 0, 3);
  EXPECT_EQ(Signals(a), (std::vector<std::pair<int, int>>{{old, SIGKILL}}));
  EXPECT_TRUE(Sent<StartedMessage>(a).empty());  // not before the old one is gone
  EXPECT_EQ(M().state(), LaunchState::kReplacing);
  EXPECT_FALSE(M().TakesAgentMessages());
  Actions b = Exited(old, Killed(SIGKILL));
  ASSERT_EQ(Sent<EndedMessage>(b).size(), 1u);
  EXPECT_EQ(Sent<EndedMessage>(b)[0].generation, 1);
  EXPECT_EQ(Sent<EndedMessage>(b)[0].outcome, GenerationOutcome::kAborted);
  ASSERT_EQ(Sent<StartedMessage>(b).size(), 1u);
  EXPECT_EQ(Sent<StartedMessage>(b)[0].generation, 2);
  EXPECT_LT(IndexOf<SendToAgent>(b), IndexOf<ResolveMaster>(b));  // ended, then the new one
  EXPECT_EQ(All<StartProgram>(b).size(), 1u);
  EXPECT_TRUE(M().TakesAgentMessages());
  EXPECT_EQ(M().state(), LaunchState::kRunning);
}

TEST_F(LaunchMachineTest, AnOldProgramThatOutlivesTheReplaceWaitIsLeftToTheSweep) {
  Assign(1, 1);
  Assign(2, 1);
  EXPECT_TRUE(Sent<StartedMessage>(TickAt(now_ + kReplaceWaitSeconds / 2)).empty());
  Actions a = TickAt(now_ + kReplaceWaitSeconds);
  EXPECT_TRUE(Sent<EndedMessage>(a).empty());
  ASSERT_EQ(Sent<StartedMessage>(a).size(), 1u);
  EXPECT_EQ(Sent<StartedMessage>(a)[0].generation, 2);
  EXPECT_EQ(M().state(), LaunchState::kRunning);
}

TEST_F(LaunchMachineTest, AStaleAbortOrStopTouchesNothingAndACurrentAbortKills) {
  Assign(5, 1);
  EXPECT_TRUE(Signals(Feed(AgentSaid{AbortMessage{4}})).empty());
  EXPECT_TRUE(All<TellProgram>(Feed(AgentSaid{StopMessage{4, kStopResize}})).empty());
  EXPECT_EQ(Signals(Feed(AgentSaid{AbortMessage{5}})), (std::vector<std::pair<int, int>>{{last_pid_, SIGKILL}}));
  Actions a = Exited(last_pid_, Killed(SIGKILL));
  ASSERT_EQ(Sent<EndedMessage>(a).size(), 1u);
  EXPECT_EQ(Sent<EndedMessage>(a)[0].outcome, GenerationOutcome::kAborted);
  EXPECT_EQ(Sent<EndedMessage>(a)[0].error, "");
}

TEST_F(LaunchMachineTest, AStaleMasterAnswerIsIgnored) {
  hold_master_ = true;
  Assign(2, 1);
  EXPECT_EQ(M().state(), LaunchState::kAwaitingMaster);
  EXPECT_TRUE(All<StartProgram>(Feed(MasterResolved{1, Status::OK(), "h", 1})).empty());
  EXPECT_EQ(All<StartProgram>(Feed(MasterResolved{2, Status::OK(), "h", 1})).size(), 1u);
}

TEST_F(LaunchMachineTest, AwaitingMasterGivesUpOnAnAbortANewerPlanOrAnExit) {
  hold_master_ = true;
  Assign(2, 1);
  EXPECT_TRUE(M().KeepAwaitingMaster({}));
  EXPECT_TRUE(M().KeepAwaitingMaster({AbortMessage{1}, StopMessage{2, kStopResize}}));
  EXPECT_FALSE(M().KeepAwaitingMaster({AbortMessage{2}}));
  AssignMessage newer;
  newer.generation = 3;
  EXPECT_FALSE(M().KeepAwaitingMaster({newer}));
  EXPECT_FALSE(M().KeepAwaitingMaster({ExitMessage{}}));
  // Cancelled: aborted, no error (not a fault of this rank).
  Actions a = Feed(MasterResolved{2, Status::Cancelled("gave up"), "", 0});
  ASSERT_EQ(Sent<EndedMessage>(a).size(), 1u);
  EXPECT_EQ(Sent<EndedMessage>(a)[0].outcome, GenerationOutcome::kAborted);
  EXPECT_EQ(Sent<EndedMessage>(a)[0].error, "");
  EXPECT_FALSE(Sent<EndedMessage>(a)[0].leaving);
  EXPECT_EQ(M().state(), LaunchState::kIdle);
}

TEST_F(LaunchMachineTest, RankZeroThatNeverPublishesFailsTheGenerationAtTheDeadline) {
  master_status_ = Status::DeadlineExceeded("rank 0 did not publish within collective_timeout=30s");
  Actions a = Assign(2, 1);
  ASSERT_EQ(Sent<EndedMessage>(a).size(), 1u);
  EXPECT_EQ(Sent<EndedMessage>(a)[0].outcome, GenerationOutcome::kFailed);
  EXPECT_NE(Sent<EndedMessage>(a)[0].error.find("collective_timeout=30s"), std::string::npos);
  EXPECT_TRUE(All<StartProgram>(a).empty());
  EXPECT_EQ(M().state(), LaunchState::kIdle);
}

TEST_F(LaunchMachineTest, AProgramThatCannotStartFailsTheGeneration) {
  start_error_ = Status::IOError("fork failed: Resource temporarily unavailable");
  Actions a = Assign(0, 1);
  ASSERT_EQ(Sent<EndedMessage>(a).size(), 1u);
  EXPECT_EQ(Sent<EndedMessage>(a)[0].outcome, GenerationOutcome::kFailed);
  EXPECT_NE(Sent<EndedMessage>(a)[0].error.find("fork failed"), std::string::npos);
  EXPECT_EQ(M().state(), LaunchState::kIdle);
}

TEST_F(LaunchMachineTest, RankZeroThatCannotPublishFailsTheGenerationBeforeItsProgramStarts) {
  publish_error_ = Status::Unavailable("rendezvous store: cannot publish launch_master_g0: connection refused");
  Actions a = Assign(0, 0);
  EXPECT_TRUE(All<StartProgram>(a).empty());
  ASSERT_EQ(Sent<EndedMessage>(a).size(), 1u);
  EXPECT_EQ(Sent<EndedMessage>(a)[0].outcome, GenerationOutcome::kFailed);
  EXPECT_NE(Sent<EndedMessage>(a)[0].error.find("launch_master_g0"), std::string::npos);
  EXPECT_EQ(M().state(), LaunchState::kIdle);
}

// ---------------------------------------------------------------- program exits
TEST_F(LaunchMachineTest, ExitZeroCompletesTheGeneration) {
  Assign(0, 1);
  Say(last_pid_, Step(7));
  Actions a = Exited(last_pid_, Code(0));
  ASSERT_EQ(Sent<EndedMessage>(a).size(), 1u);
  const EndedMessage e = Sent<EndedMessage>(a)[0];
  EXPECT_EQ(e.outcome, GenerationOutcome::kCompleted);
  EXPECT_EQ(e.step, 7);
  EXPECT_EQ(e.start_step, 6);
  EXPECT_FALSE(e.leaving);
  EXPECT_EQ(M().state(), LaunchState::kIdle);
  EXPECT_TRUE(All<Exit>(a).empty());  // the worker waits for the next generation
}

TEST_F(LaunchMachineTest, ANonZeroExitOrASignalFailsTheGenerationNamingIt) {
  Assign(0, 1);
  Actions a = Exited(last_pid_, Code(7));
  ASSERT_EQ(Sent<EndedMessage>(a).size(), 1u);
  EXPECT_EQ(Sent<EndedMessage>(a)[0].outcome, GenerationOutcome::kFailed);
  EXPECT_NE(Sent<EndedMessage>(a)[0].error.find("train.py"), std::string::npos);
  EXPECT_NE(Sent<EndedMessage>(a)[0].error.find("code 7"), std::string::npos) << Sent<EndedMessage>(a)[0].error;
  Assign(1, 1);
  Actions b = Exited(last_pid_, Killed(SIGSEGV));
  ASSERT_EQ(Sent<EndedMessage>(b).size(), 1u);
  EXPECT_EQ(Sent<EndedMessage>(b)[0].outcome, GenerationOutcome::kFailed);
  EXPECT_NE(Sent<EndedMessage>(b)[0].error.find("SIGSEGV"), std::string::npos) << Sent<EndedMessage>(b)[0].error;
}

// Issue 34: a program that fails at import names its cause (the traceback's last line),
// not only "exited with code 1"; one that completes or is stopped quotes nothing.
TEST_F(LaunchMachineTest, AFailedProgramsErrorQuotesTheEndOfItsStderr) {
  const std::string tail = "Traceback (most recent call last): | import no_such_module | "
                           "ModuleNotFoundError: No module named 'no_such_module'";
  Assign(0, 1);
  Actions a = Feed(ProcessReaped{last_pid_, Code(1), tail});
  ASSERT_EQ(Sent<EndedMessage>(a).size(), 1u);
  const std::string error = Sent<EndedMessage>(a)[0].error;
  EXPECT_NE(error.find("exited with code 1 [its stderr ended: " + tail + "]"), std::string::npos) << error;
  Assign(1, 1);
  Actions b = Feed(ProcessReaped{last_pid_, Code(0), tail});
  ASSERT_EQ(Sent<EndedMessage>(b).size(), 1u);
  EXPECT_EQ(Sent<EndedMessage>(b)[0].outcome, GenerationOutcome::kCompleted);
  EXPECT_EQ(Sent<EndedMessage>(b)[0].error, "");
  Assign(2, 1);
  Actions c = Feed(ProcessReaped{last_pid_, Code(1), ""});  // nothing on stderr: nothing quoted
  ASSERT_EQ(Sent<EndedMessage>(c).size(), 1u);
  EXPECT_EQ(Sent<EndedMessage>(c)[0].error.find("stderr"), std::string::npos) << Sent<EndedMessage>(c)[0].error;
}

TEST_F(LaunchMachineTest, AnExitOfAnotherChildOnlyAsksForASweep) {
  Assign(0, 1);
  const int prog = last_pid_;
  Actions a = Exited(9999, Code(0));
  EXPECT_TRUE(Sent<EndedMessage>(a).empty());
  Actions b = TickAt(now_ + kOrphanSweepSeconds);
  ASSERT_EQ(All<SweepOrphans>(b).size(), 1u);
  EXPECT_EQ(All<SweepOrphans>(b)[0].keep, std::vector<int>{prog});
  EXPECT_TRUE(All<SweepOrphans>(TickAt(now_ + 0.1)).empty());  // once per exit
}

// ---------------------------------------------------------------- stops and deadlines
TEST_F(LaunchMachineTest, AProgramThatTalksIsToldOfAStopAndSignalledOnlyAtItsDeadline) {
  Assign(0, 1);
  const int prog = last_pid_;
  Say(prog, ProgramHello{prog, false});
  Actions a = Feed(AgentSaid{StopMessage{0, kStopResize}});
  ASSERT_EQ(All<TellProgram>(a).size(), 1u);
  EXPECT_TRUE(All<TellProgram>(a)[0].control.stop);
  EXPECT_EQ(All<TellProgram>(a)[0].control.reason, "resize");
  EXPECT_EQ(All<TellProgram>(a)[0].control.deadline, now_ + kNotice);
  EXPECT_TRUE(Signals(a).empty());
  EXPECT_EQ(M().state(), LaunchState::kStopping);
  const double deadline = now_ + kNotice;
  Say(prog, ProgramHeartbeat{});
  EXPECT_TRUE(Signals(TickAt(deadline - 1)).empty());
  EXPECT_EQ(Signals(TickAt(deadline)), (std::vector<std::pair<int, int>>{{prog, SIGTERM}}));
  EXPECT_TRUE(Signals(TickAt(deadline + kKillGraceSeconds - 1)).empty());
  EXPECT_EQ(Signals(TickAt(deadline + kKillGraceSeconds)), (std::vector<std::pair<int, int>>{{prog, SIGKILL}}));
  Actions b = Exited(prog, Killed(SIGKILL));
  ASSERT_EQ(Sent<EndedMessage>(b).size(), 1u);
  EXPECT_EQ(Sent<EndedMessage>(b)[0].outcome, GenerationOutcome::kStopped);
  EXPECT_EQ(Sent<EndedMessage>(b)[0].stop_reasons, kStopResize);
}

TEST_F(LaunchMachineTest, AUserStopIsNamedUser) {
  Assign(0, 1);
  Actions a = Feed(AgentSaid{StopMessage{0, kStopUser}});
  ASSERT_EQ(All<TellProgram>(a).size(), 1u);
  EXPECT_EQ(All<TellProgram>(a)[0].control.reason, "user");
  Actions b = Exited(last_pid_, Code(0));
  EXPECT_EQ(Sent<EndedMessage>(b)[0].outcome, GenerationOutcome::kStopped);
  EXPECT_EQ(Sent<EndedMessage>(b)[0].stop_reasons, kStopUser);
}

// Hello grace: a program silent since its start gets torchrun's SIGTERM once it is
// kHelloGraceSeconds old, and SIGKILL at the notice's end.
TEST_F(LaunchMachineTest, AProgramThatNeverSaysHelloGetsSigtermWhenItsGraceExpires) {
  const double start = now_;
  Assign(0, 1);
  const int prog = last_pid_;
  now_ = start + 0.5;
  EXPECT_TRUE(Signals(Feed(AgentSaid{StopMessage{0, kStopResize}})).empty());
  EXPECT_TRUE(Signals(TickAt(start + kHelloGraceSeconds - 0.1)).empty());
  EXPECT_EQ(Signals(TickAt(start + kHelloGraceSeconds)), (std::vector<std::pair<int, int>>{{prog, SIGTERM}}));
  const double deadline = start + 0.5 + kNotice;
  EXPECT_TRUE(Signals(TickAt(deadline - 0.1)).empty());
  EXPECT_EQ(Signals(TickAt(deadline)), (std::vector<std::pair<int, int>>{{prog, SIGKILL}}));
}

TEST_F(LaunchMachineTest, AProgramOlderThanItsGraceGetsSigtermAtOnce) {
  const double start = now_;
  Assign(0, 1);
  now_ = start + kHelloGraceSeconds + 1;
  EXPECT_EQ(Signals(Feed(AgentSaid{StopMessage{0, kStopResize}})),
            (std::vector<std::pair<int, int>>{{last_pid_, SIGTERM}}));
}

TEST_F(LaunchMachineTest, AHelloWithinTheGraceKeepsTheStopsDeadline) {
  const double start = now_;
  Assign(0, 1);
  const int prog = last_pid_;
  Feed(AgentSaid{StopMessage{0, kStopResize}});
  now_ = start + 1;
  Say(prog, ProgramHello{prog, false});
  EXPECT_TRUE(Signals(TickAt(start + kHelloGraceSeconds)).empty());  // it was told instead
  Say(prog, ProgramHeartbeat{});
  EXPECT_EQ(Signals(TickAt(start + kNotice)), (std::vector<std::pair<int, int>>{{prog, SIGTERM}}));
}

// ---------------------------------------------------------------- preemption
TEST_F(LaunchMachineTest, APreemptionSignalsTheGroupAtOnceAndTheWorkerLeavesOnceTheProgramExited) {
  LaunchMachineOptions o = Options();
  o.warm_spares = true;
  Make(o);
  Feed(Begin{1});
  const int spare = spare_pid_;
  Assign(0, 1);  // the spare takes the rank
  ASSERT_EQ(last_pid_, spare);
  Say(spare, ProgramWaiting{});
  Say(spare, Step(1));
  TickAt(now_ + 0.01);  // the first step: the next spare starts
  const int next_spare = last_pid_;
  ASSERT_NE(next_spare, spare);
  Actions a = Feed(PreemptionNotice{});
  EXPECT_EQ(Signals(a), (std::vector<std::pair<int, int>>{{next_spare, SIGKILL}, {0, SIGTERM}}));
  ASSERT_EQ(All<TellProgram>(a).size(), 1u);
  EXPECT_EQ(All<TellProgram>(a)[0].control.reason, "preemption");
  EXPECT_TRUE(All<Exit>(a).empty());
  EXPECT_TRUE(Feed(ProcessReaped{next_spare, Killed(SIGKILL)}).empty());
  EXPECT_EQ(Signals(TickAt(now_ + kNotice)), (std::vector<std::pair<int, int>>{{spare, SIGKILL}}));
  Actions b = Exited(spare, Killed(SIGKILL));
  ASSERT_EQ(Sent<EndedMessage>(b).size(), 1u);
  EXPECT_EQ(Sent<EndedMessage>(b)[0].outcome, GenerationOutcome::kStopped);
  EXPECT_EQ(Sent<EndedMessage>(b)[0].stop_reasons, kStopPreemption);
  EXPECT_TRUE(Sent<EndedMessage>(b)[0].leaving);
  ASSERT_EQ(All<Exit>(b).size(), 1u);
  EXPECT_EQ(All<Exit>(b)[0].code, kExitPreempted);
  EXPECT_EQ(M().state(), LaunchState::kExited);
  EXPECT_TRUE(M().Step(Tick{}, now_ + 1).empty());
}

TEST_F(LaunchMachineTest, APreemptionOfAWorkerThatDoesNotLeadItsGroupSignalsTheProgram) {
  LaunchMachineOptions o = Options();
  o.leads_process_group = false;
  Make(o);
  Assign(0, 1);
  EXPECT_EQ(Signals(Feed(PreemptionNotice{})), (std::vector<std::pair<int, int>>{{last_pid_, SIGTERM}}));
}

TEST_F(LaunchMachineTest, APreemptionOfAnIdleWorkerExitsAtOnce) {
  Feed(Begin{1});
  Actions a = Feed(PreemptionNotice{});
  ASSERT_EQ(All<Exit>(a).size(), 1u);
  EXPECT_EQ(All<Exit>(a)[0].code, kExitPreempted);
}

TEST_F(LaunchMachineTest, APreemptionWhileAwaitingRankZeroEndsTheGenerationStoppedAndLeaves) {
  hold_master_ = true;
  Assign(2, 1);
  Feed(PreemptionNotice{});
  EXPECT_FALSE(M().KeepAwaitingMaster({}));
  Actions a = Feed(MasterResolved{2, Status::Cancelled("gave up"), "", 0});
  ASSERT_EQ(Sent<EndedMessage>(a).size(), 1u);
  EXPECT_EQ(Sent<EndedMessage>(a)[0].outcome, GenerationOutcome::kStopped);
  EXPECT_EQ(Sent<EndedMessage>(a)[0].stop_reasons, kStopPreemption);
  EXPECT_TRUE(Sent<EndedMessage>(a)[0].leaving);
  ASSERT_EQ(All<Exit>(a).size(), 1u);
  EXPECT_EQ(All<Exit>(a)[0].code, kExitPreempted);
}

// ---------------------------------------------------------------- the agent
TEST_F(LaunchMachineTest, AnExitFromTheAgentOrItsDepartureEndsTheWorker) {
  Assign(0, 1);
  Actions a = Feed(AgentSaid{ExitMessage{}});
  ASSERT_EQ(All<Exit>(a).size(), 1u);
  EXPECT_EQ(All<Exit>(a)[0].code, kExitSuccess);
  m_.reset();
  Actions b = Feed(AgentGone{});
  ASSERT_EQ(All<Exit>(b).size(), 1u);
  EXPECT_EQ(All<Exit>(b)[0].code, kExitSuccess);
}

TEST_F(LaunchMachineTest, TicksFollowATalkingProgramAndStopWhenItFallsSilent) {
  Assign(4, 1);
  const int prog = last_pid_;
  Actions a = TickAt(now_);
  ASSERT_EQ(Sent<ProgressMessage>(a).size(), 1u);
  EXPECT_EQ(Sent<ProgressMessage>(a)[0].generation, 4);
  EXPECT_EQ(Sent<ProgressMessage>(a)[0].phase, TrainPhase::kSetup);
  EXPECT_TRUE(Sent<ProgressMessage>(TickAt(now_ + kTickSeconds / 2)).empty());
  Say(prog, ProgramHello{prog, false});
  EXPECT_EQ(Sent<ProgressMessage>(TickAt(now_ + kTickSeconds)).size(), 1u);
  EXPECT_TRUE(Sent<ProgressMessage>(TickAt(now_ + kProgramSilenceSeconds + 0.5)).empty());  // silent
  Say(prog, Step(3));
  Actions b = TickAt(now_);
  ASSERT_EQ(Sent<ProgressMessage>(b).size(), 1u);
  EXPECT_EQ(Sent<ProgressMessage>(b)[0].phase, TrainPhase::kTrain);
  EXPECT_EQ(Sent<ProgressMessage>(b)[0].step, 3);
}

TEST_F(LaunchMachineTest, TicksCarryTheCollectiveTheProgramSaidItIsIn) {
  Assign(2, 1);
  const int prog = last_pid_;
  Say(prog, ProgramHello{prog, false});
  Actions a = TickAt(now_);
  ASSERT_EQ(Sent<ProgressMessage>(a).size(), 1u);
  EXPECT_EQ(Sent<ProgressMessage>(a)[0].collective_seq, -1) << "none entered yet";
  Say(prog, ProgramCollective{17, "allreduce", true});
  Actions b = TickAt(now_ + kTickSeconds);
  ASSERT_EQ(Sent<ProgressMessage>(b).size(), 1u);
  EXPECT_EQ(Sent<ProgressMessage>(b)[0].collective_seq, 17);
  EXPECT_EQ(Sent<ProgressMessage>(b)[0].collective_kind, "allreduce");
  EXPECT_TRUE(Sent<ProgressMessage>(b)[0].in_collective);
  Say(prog, ProgramCollective{17, "allreduce", false});
  Actions c = TickAt(now_ + 2 * kTickSeconds);
  ASSERT_EQ(Sent<ProgressMessage>(c).size(), 1u);
  EXPECT_FALSE(Sent<ProgressMessage>(c)[0].in_collective);
}

TEST_F(LaunchMachineTest, NextDeadlineIsTheNextTickOrStopDeadline) {
  Assign(0, 1);
  TickAt(now_);
  EXPECT_DOUBLE_EQ(M().NextDeadline(now_), now_ + kTickSeconds);
  Say(last_pid_, ProgramHello{last_pid_, false});
  Feed(AgentSaid{StopMessage{0, kStopResize}});
  EXPECT_DOUBLE_EQ(M().NextDeadline(now_), now_ + kTickSeconds);
  // Silent: the ticks are held, and the next look is a tick's length away, not in the past.
  const double later = now_ + kProgramSilenceSeconds + 1;
  EXPECT_DOUBLE_EQ(M().NextDeadline(later), later + kTickSeconds);
}

// ---------------------------------------------------------------- steps and checkpoints
TEST_F(LaunchMachineTest, StepsCarryTheirAnatomyToTheAgent) {
  Assign(0, 1);
  const int prog = last_pid_;
  now_ += 30;  // the program's start-up
  ProgramStep s;
  s.step = 1;
  // Its first step, timed by this worker, spans the start-up: sent untimed.
  StepMessage m = Sent<StepMessage>(Say(prog, s)).at(0);
  EXPECT_DOUBLE_EQ(m.step_seconds, 30);
  EXPECT_EQ(m.compute_seconds, 0);
  EXPECT_EQ(m.wait_seconds, 0);
  // Timed by this worker between reports, without compute_seconds: all compute.
  now_ += 2;
  s.step = 2;
  m = Sent<StepMessage>(Say(prog, s)).at(0);
  EXPECT_DOUBLE_EQ(m.step_seconds, 2);
  EXPECT_DOUBLE_EQ(m.compute_seconds, 2);
  EXPECT_EQ(m.wait_seconds, 0);
  // The program's own figures: the rest of the step is waiting.
  now_ += 2;
  s.step = 3;
  s.step_seconds = 1.5;
  s.compute_seconds = 0.5;
  m = Sent<StepMessage>(Say(prog, s)).at(0);
  EXPECT_DOUBLE_EQ(m.step_seconds, 1.5);
  EXPECT_DOUBLE_EQ(m.compute_seconds, 0.5);
  EXPECT_DOUBLE_EQ(m.wait_seconds, 1.0);
  // compute_seconds without step_seconds, more than the time between reports: capped at it.
  now_ += 1;
  s.step = 4;
  s.step_seconds = 0;
  s.compute_seconds = 3;
  m = Sent<StepMessage>(Say(prog, s)).at(0);
  EXPECT_DOUBLE_EQ(m.step_seconds, 1);
  EXPECT_DOUBLE_EQ(m.compute_seconds, 1);
  EXPECT_EQ(m.wait_seconds, 0);
}

TEST_F(LaunchMachineTest, AProgramsFirstStepWithItsOwnTimingIsTimed) {
  Assign(0, 0);
  ProgramStep s;
  s.step = 1;
  s.step_seconds = 0.8;
  s.compute_seconds = 0.6;
  const StepMessage m = Sent<StepMessage>(Say(last_pid_, s)).at(0);
  EXPECT_DOUBLE_EQ(m.compute_seconds, 0.6);
  EXPECT_NEAR(m.wait_seconds, 0.2, 1e-12);
}

TEST_F(LaunchMachineTest, StepsGoToTheAgentAndRankZeroWritesEveryLogPeriodthToMetrics) {
  Assign(0, 0);
  const int prog = last_pid_;
  ProgramStep s;
  s.step = 5;
  s.loss = 2.5;
  s.tokens = 1000;
  s.step_seconds = 0.5;
  Actions a = Say(prog, s);
  ASSERT_EQ(Sent<StepMessage>(a).size(), 1u);
  EXPECT_EQ(Sent<StepMessage>(a)[0].step, 5);
  EXPECT_DOUBLE_EQ(Sent<StepMessage>(a)[0].loss, 2.5);
  ASSERT_EQ(All<WriteMetrics>(a).size(), 1u);  // the first step is always written
  EXPECT_DOUBLE_EQ(All<WriteMetrics>(a)[0].record["tokens_per_sec"].get<double>(), 2000);
  s.step = 6;
  EXPECT_TRUE(All<WriteMetrics>(Say(prog, s)).empty());
  s.step = 10;
  EXPECT_EQ(All<WriteMetrics>(Say(prog, s)).size(), 1u);
}

TEST_F(LaunchMachineTest, CheckpointsAreReportedAndRankZeroEmitsTheEvent) {
  Assign(0, 1);
  Actions a = Say(last_pid_, ProgramCheckpoint{40, 1.5});
  ASSERT_EQ(Sent<CheckpointMessage>(a).size(), 1u);
  EXPECT_EQ(Sent<CheckpointMessage>(a)[0].step, 40);
  EXPECT_TRUE(All<EmitEvent>(a).empty());  // rank 1
  Exited(last_pid_, Code(0));
  Assign(1, 0);
  Actions b = Say(last_pid_, ProgramCheckpoint{60, 1.5});
  ASSERT_EQ(All<EmitEvent>(b).size(), 1u);
  const EmitEvent emitted = All<EmitEvent>(b)[0];
  const auto* saved = std::get_if<CheckpointSavedEvent>(&emitted.event);
  ASSERT_NE(saved, nullptr);
  EXPECT_EQ(saved->step, 60);
  EXPECT_EQ(saved->stall_seconds, 1.5);
}

TEST_F(LaunchMachineTest, AutoCheckpointPeriodIsToldAndRecordedAtGenerationStart) {
  LaunchMachineOptions o = Options();
  o.checkpoint_period_auto = true;
  o.checkpoint_mtti_prior_seconds = 3600;
  o.checkpoint_period_min = 10;
  o.checkpoint_period_max = 1000;
  Make(o);
  Actions a = Assign(0, 0);
  ASSERT_EQ(All<EmitEvent>(a).size(), 1u);
  const EmitEvent emitted = All<EmitEvent>(a)[0];
  const auto* changed = std::get_if<CheckpointPeriodChangedEvent>(&emitted.event);
  ASSERT_NE(changed, nullptr);
  EXPECT_EQ(changed->reason, "generation_start");
  ASSERT_EQ(All<TellProgram>(a).size(), 1u);
  EXPECT_EQ(All<TellProgram>(a)[0].control.checkpoint_period, 10);  // min until a save is measured
}

// ---------------------------------------------------------------- spares
class LaunchSpareTest : public LaunchMachineTest {
 protected:
  void SetUp() override {
    LaunchMachineOptions o = Options();
    o.warm_spares = true;
    Make(o);
    Feed(Begin{1});
    spare_ = spare_pid_;
  }
  int spare_ = -1;
};

TEST_F(LaunchSpareTest, AGenerationHandsItsRankToTheSpare) {
  Actions a = Assign(0, 1);
  EXPECT_TRUE(All<StartProgram>(a).empty());
  ASSERT_EQ(All<AssignSpare>(a).size(), 1u);
  EXPECT_EQ(All<AssignSpare>(a)[0].env.at("RANK"), "1");
  EXPECT_EQ(M().state(), LaunchState::kRunning);
  // The next spare: at the first step, not before.
  EXPECT_TRUE(All<StartProgram>(TickAt(now_ + 1)).empty());
  Say(spare_, Step(1));
  Actions b = TickAt(now_);
  ASSERT_EQ(All<StartProgram>(b).size(), 1u);
  EXPECT_TRUE(All<StartProgram>(b)[0].spare);
}

TEST_F(LaunchSpareTest, TheNextSpareStartsAfterTheDelayWithoutAStep) {
  Assign(0, 1);
  const double handed = now_;
  EXPECT_TRUE(All<StartProgram>(TickAt(handed + kSpareDelaySeconds - 0.1)).empty());
  EXPECT_EQ(All<StartProgram>(TickAt(handed + kSpareDelaySeconds)).size(), 1u);
}

TEST_F(LaunchSpareTest, AWarmRankZeroPublishesOnceItListensOrAfterTheWait) {
  Actions a = Assign(0, 0);
  EXPECT_TRUE(All<PublishMaster>(a).empty());  // not listening yet
  EXPECT_EQ(All<ProbeListening>(a).size(), 1u);
  EXPECT_EQ(All<ProbeListening>(a)[0].port, 29500);
  TickAt(now_);  // the first liveness tick is due at once
  EXPECT_DOUBLE_EQ(M().NextDeadline(now_), now_ + kListenProbeSeconds);
  EXPECT_TRUE(All<PublishMaster>(TickAt(now_ + 0.5)).empty());
  listening_ = true;
  EXPECT_EQ(All<PublishMaster>(TickAt(now_ + 0.01)).size(), 1u);
  EXPECT_TRUE(All<ProbeListening>(TickAt(now_ + 0.01)).empty());  // published: no more looks
}

TEST_F(LaunchSpareTest, AWarmRankZeroThatNeverListensIsPublishedAfterTheWait) {
  const double start = now_;
  Assign(0, 0);
  EXPECT_TRUE(All<PublishMaster>(TickAt(start + kListenWaitSeconds - 0.1)).empty());
  EXPECT_EQ(All<PublishMaster>(TickAt(start + kListenWaitSeconds)).size(), 1u);
}

TEST(LaunchSpareStartTest, ASpareThatCannotStartTurnsWarmStartsOff) {
  LaunchMachineOptions o;
  o.warm_spares = true;
  LaunchMachine m(o);
  Actions a = m.Step(Begin{1}, 0);
  ASSERT_EQ(All<StartProgram>(a).size(), 1u);
  m.Step(ProgramStartFailed{All<StartProgram>(a)[0].program, Status::IOError("fork failed")}, 0);
  EXPECT_TRUE(m.warm_starts_off());
  EXPECT_EQ(m.state(), LaunchState::kIdle);
}

TEST_F(LaunchSpareTest, ASpareThatDiesBeforeItsRankTurnsWarmStartsOff) {
  Actions a = Exited(spare_, Code(1));
  EXPECT_TRUE(Sent<EndedMessage>(a).empty());
  EXPECT_TRUE(M().warm_starts_off());
  Actions b = Assign(0, 1);
  ASSERT_EQ(All<StartProgram>(b).size(), 1u);  // cold
  EXPECT_FALSE(All<StartProgram>(b)[0].spare);
  Say(last_pid_, Step(1));
  EXPECT_TRUE(All<StartProgram>(TickAt(now_ + kSpareDelaySeconds)).empty());  // no more spares
}

TEST_F(LaunchSpareTest, ASpareHandedARankThatDiesWithoutWaitingRestartsColdOnce) {
  Assign(0, 1);
  Actions a = Exited(spare_, Code(1));
  EXPECT_TRUE(Sent<EndedMessage>(a).empty());
  ASSERT_EQ(All<StartProgram>(a).size(), 1u);
  EXPECT_FALSE(All<StartProgram>(a)[0].spare);
  EXPECT_EQ(All<StartProgram>(a)[0].env.at("RANK"), "1");
  EXPECT_TRUE(M().warm_starts_off());
  const int cold = last_pid_;
  Actions b = Exited(cold, Code(1));  // the cold one fails: that is the generation's failure
  ASSERT_EQ(Sent<EndedMessage>(b).size(), 1u);
  EXPECT_EQ(Sent<EndedMessage>(b)[0].outcome, GenerationOutcome::kFailed);
}

TEST_F(LaunchSpareTest, ASpareThatWaitedAndThenFailedFailsTheGeneration) {
  Say(spare_, ProgramWaiting{});
  Assign(0, 1);
  Actions a = Exited(spare_, Code(2));
  EXPECT_TRUE(All<StartProgram>(a).empty());
  ASSERT_EQ(Sent<EndedMessage>(a).size(), 1u);
  EXPECT_EQ(Sent<EndedMessage>(a)[0].outcome, GenerationOutcome::kFailed);
  EXPECT_FALSE(M().warm_starts_off());
}

TEST_F(LaunchSpareTest, ASpareThatCannotBeTakenIsPassedOverForAColdStart) {
  // The spare's channel refuses the assign: the rank starts cold, the spare stays spare.
  spare_assign_error_ = Status::Unavailable("channel closed by the peer");
  Actions a = Assign(0, 1);
  ASSERT_EQ(All<AssignSpare>(a).size(), 1u);
  ASSERT_EQ(All<StartProgram>(a).size(), 1u);
  EXPECT_FALSE(All<StartProgram>(a)[0].spare);
  EXPECT_NE(last_pid_, spare_);
  EXPECT_TRUE(Sent<EndedMessage>(Exited(spare_, Killed(SIGKILL))).empty());  // the spare's end is no generation's
}

TEST_F(LaunchSpareTest, AClosedChannelMakesLivenessTheProcesssAgain) {
  Assign(0, 1);
  Say(spare_, ProgramHello{spare_, true});
  Feed(ProgramChannelClosed{ProgramId(spare_)});
  // Silent for long, but it no longer talks: the ticks go on.
  EXPECT_EQ(Sent<ProgressMessage>(TickAt(now_ + kProgramSilenceSeconds + 1)).size(), 1u);
}

}  // namespace
}  // namespace elastrain::launch
