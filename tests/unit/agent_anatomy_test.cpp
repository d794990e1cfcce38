// The agent's step anatomy and collective mark (elastic/agent_machine.h, issue 32): the
// window of each worker's last timed steps, its reset at a new generation, and the
// refusal of figures that cannot be measurements. Driven without processes, as
// elastic_agent_test.cpp drives the machine.
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "elastic/agent_machine.h"

namespace elastrain {
namespace {

constexpr double kHeartbeat = 20, kCollective = 30, kNotice = 15;

// Keeps the warnings logged while it lives.
class LogLines {
 public:
  LogLines() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64)) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~LogLines() {
    auto& sinks = spdlog::default_logger()->sinks();
    std::erase(sinks, sink_);
  }
  std::vector<std::string> All() const { return sink_->last_formatted(); }
  // The lines that contain every one of `parts`.
  size_t Count(const std::vector<std::string>& parts) const {
    size_t n = 0;
    for (const std::string& l : All()) {
      bool all = true;
      for (const std::string& p : parts) all = all && l.find(p) != std::string::npos;
      n += all ? 1 : 0;
    }
    return n;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

// Agent "a1" on host "h1" with two slots; both workers ready and members of generation 0.
class AgentAnatomyTest : public ::testing::Test {
 protected:
  AgentAnatomyTest() : m_(Options()) {
    JobObserved j;
    j.spec = JobSpec{"job1", "model_name: tiny\n", "/runs/job1", 1};
    j.settings = AgentJobSettings{kHeartbeat, kCollective, kNotice, 0};
    Feed(j);
    for (int slot = 0; slot < 2; ++slot) {
      const std::string w = "a1-w" + std::to_string(slot);
      Feed(WorkerSpawned{w, 100 + slot});
      Feed(WorkerSaid{w, ReadyMessage{100 + slot, -1}});
    }
    StartGeneration(0);
  }
  static AgentMachineOptions Options() {
    AgentMachineOptions o;
    o.id = "a1";
    o.host = "h1";
    o.slots = 2;
    o.cores = 2;
    o.store_url = "memory://";
    return o;
  }
  std::vector<AgentAction> Feed(const AgentInput& in) { return m_.Step(in, now_); }
  void StartGeneration(int64_t gen) {
    Plan p;
    p.job_id = "job1";
    p.generation = gen;
    p.world = p.data = 2;
    p.created_at = now_;
    p.rendezvous = RendezvousAddress::File("/runs/job1/rendezvous/job1");
    for (int r = 0; r < 2; ++r) p.members.push_back({r, "a1-w" + std::to_string(r), "a1", "h1", 100 + r});
    Feed(PlanSeen{p});
    for (int r = 0; r < 2; ++r) Feed(WorkerSaid{"a1-w" + std::to_string(r), StartedMessage{gen, r, 2}});
  }
  // Worker a1-w0 reports step `step` of generation `gen`.
  void Step(int64_t gen, int64_t step, double step_seconds, double compute, double wait) {
    now_ += 1;
    Feed(WorkerSaid{"a1-w0", StepMessage{gen, step, 0, 2.5, step_seconds, now_, compute, wait}});
  }
  void Tick(int64_t gen, int64_t seq, const std::string& kind, bool inside) {
    now_ += 0.25;
    Feed(WorkerSaid{"a1-w0", ProgressMessage{gen, 3, TrainPhase::kTrain, now_, seq, kind, inside}});
  }
  const WorkerRecord& W0() { return *m_.Worker("a1-w0"); }

  AgentMachine m_;
  double now_ = 1000;
};

TEST_F(AgentAnatomyTest, TheRecordHoldsTheMeansOfTheLastWindowOfTimedSteps) {
  EXPECT_EQ(W0().timed_steps, 0);
  EXPECT_EQ(W0().timed_until_step, -1);
  Step(0, 1, 1.0, 0.6, 0.4);
  Step(0, 2, 1.0, 0.8, 0.2);
  EXPECT_EQ(W0().timed_steps, 2);
  EXPECT_EQ(W0().timed_until_step, 2);
  EXPECT_DOUBLE_EQ(W0().compute_seconds, 0.7);
  EXPECT_DOUBLE_EQ(W0().wait_seconds, 0.3);
  // Steps 3..9: compute 3, 4, ..., 9 tenths of 2 s steps; the window keeps the last five.
  for (int64_t s = 3; s <= 9; ++s) Step(0, s, 2.0, 0.1 * static_cast<double>(s), 0.5);
  ASSERT_EQ(kAnatomyWindow, 5);
  EXPECT_EQ(W0().timed_steps, 5);
  EXPECT_EQ(W0().timed_until_step, 9);
  EXPECT_NEAR(W0().compute_seconds, 0.7, 1e-12) << "the mean of steps 5..9: 0.5 .. 0.9";
  EXPECT_DOUBLE_EQ(W0().wait_seconds, 0.5);
  // The other worker reported nothing timed.
  EXPECT_EQ(m_.Worker("a1-w1")->timed_steps, 0);
  // The report the controller reads carries them.
  now_ += 1;
  std::vector<AgentAction> acts = Feed(elastrain::Tick{});
  bool reported = false;
  for (const AgentAction& a : acts)
    if (const auto* r = std::get_if<PutReport>(&a))
      for (const WorkerRecord& w : r->report.workers)
        if (w.id == "a1-w0") {
          reported = true;
          EXPECT_EQ(w.timed_steps, 5);
          EXPECT_NEAR(w.compute_seconds, 0.7, 1e-12);
        }
  EXPECT_TRUE(reported);
}

TEST_F(AgentAnatomyTest, AStepWithoutTimingLeavesTheWindowAlone) {
  Step(0, 1, 1.0, 0.6, 0.4);
  LogLines log;
  Step(0, 2, 1.0, 0, 0);  // a worker that does not measure: neither figure
  EXPECT_EQ(W0().step, 2) << "the step itself counts";
  EXPECT_EQ(W0().timed_steps, 1);
  EXPECT_EQ(W0().timed_until_step, 1);
  EXPECT_EQ(log.Count({"refused"}), 0u);
}

TEST_F(AgentAnatomyTest, ANewGenerationStartsAnEmptyWindow) {
  for (int64_t s = 1; s <= 3; ++s) Step(0, s, 1.0, 0.9, 0.1);
  Tick(0, 12, "allreduce", true);
  ASSERT_EQ(W0().timed_steps, 3);
  ASSERT_EQ(W0().collective_seq, 12);

  StartGeneration(1);
  EXPECT_EQ(W0().generation, 1);
  EXPECT_EQ(W0().timed_steps, 0);
  EXPECT_EQ(W0().timed_until_step, -1);
  EXPECT_EQ(W0().compute_seconds, 0);
  EXPECT_EQ(W0().wait_seconds, 0);
  EXPECT_EQ(W0().collective_seq, -1);
  EXPECT_EQ(W0().collective_kind, "");
  EXPECT_FALSE(W0().in_collective);
  // A late report of the old generation changes nothing.
  Step(0, 4, 1.0, 0.9, 0.1);
  Tick(0, 13, "barrier", false);
  EXPECT_EQ(W0().timed_steps, 0);
  EXPECT_EQ(W0().collective_seq, -1);
  // The new generation restarts from a restored step (2): lower than the old window's last.
  Step(1, 3, 1.0, 0.2, 0.8);
  EXPECT_EQ(W0().timed_steps, 1);
  EXPECT_EQ(W0().timed_until_step, 3);
  EXPECT_DOUBLE_EQ(W0().compute_seconds, 0.2);
}

TEST_F(AgentAnatomyTest, ImpossibleFiguresAreRefusedNamingTheWorkerAndTheField) {
  Step(0, 1, 1.0, 0.6, 0.4);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Bad {
    double step_seconds, compute, wait;
    const char* field;
  };
  const Bad bad[] = {
      {1.0, -0.1, 0.5, "compute_seconds"},        // negative
      {1.0, 0.5, nan, "wait_seconds"},            // NaN
      {inf, 0.5, 0.5, "step_seconds"},            // infinite
      {1.0, 0.7, 0.4, "exceed step_seconds"},     // compute + wait > step
      {2e6, 1e6, 1e6, "step_seconds"},            // absurdly large (over a day)
      {-1.0, 0.0, 0.1, "step_seconds"},           // a negative step
  };
  int64_t gen = 0, step = 2;
  for (const Bad& b : bad) {
    StartGeneration(++gen);  // a generation logs its worker's first refusals: each case is a first
    Step(gen, 1, 1.0, 0.6, 0.4);
    LogLines log;
    Step(gen, step, b.step_seconds, b.compute, b.wait);
    EXPECT_EQ(W0().step, step) << b.field << ": the step still counts as progress";
    EXPECT_EQ(W0().timed_steps, 1) << b.field;
    EXPECT_EQ(W0().timed_until_step, 1) << b.field;
    EXPECT_DOUBLE_EQ(W0().compute_seconds, 0.6) << b.field;
    EXPECT_DOUBLE_EQ(W0().wait_seconds, 0.4) << b.field;
    EXPECT_EQ(log.Count({"a1-w0", "refused", b.field}), 1u) << b.field << "; log:\n"
                                                            << ::testing::PrintToString(log.All());
    ++step;
  }
  // A step not after the last timed one (a replay) is refused too.
  StartGeneration(++gen);
  Step(gen, 1, 1.0, 0.6, 0.4);
  LogLines log;
  Step(gen, 1, 1.0, 0.1, 0.1);
  EXPECT_EQ(W0().timed_steps, 1);
  EXPECT_DOUBLE_EQ(W0().compute_seconds, 0.6);
  EXPECT_EQ(log.Count({"a1-w0", "refused", "step=1"}), 1u);
  // Rounding is not refused: compute + wait a hair over step_seconds.
  Step(gen, step, 1.0, 0.6, 0.4 + 1e-12);
  EXPECT_EQ(W0().timed_steps, 2);
}

TEST_F(AgentAnatomyTest, RefusalsOfAWorkerThatKeepsSendingThemAreLoggedSparingly) {
  LogLines log;
  for (int64_t s = 1; s <= 50; ++s) Step(0, s, 1.0, -1, 0);
  EXPECT_EQ(W0().timed_steps, 0);
  EXPECT_EQ(log.Count({"a1-w0", "refused"}), 3u) << "the first three of the generation";
  StartGeneration(1);
  Step(1, 1, 1.0, -1, 0);
  EXPECT_EQ(log.Count({"a1-w0", "refused"}), 4u) << "and of the next";
}

TEST_F(AgentAnatomyTest, TheProgressTickCarriesTheCollectiveMark) {
  Tick(0, -1, "", false);
  EXPECT_EQ(W0().collective_seq, -1);
  Tick(0, 0, "connect", true);
  EXPECT_EQ(W0().collective_seq, 0);
  EXPECT_EQ(W0().collective_kind, "connect");
  EXPECT_TRUE(W0().in_collective);
  Tick(0, 41, "reduce_scatter", false);
  EXPECT_EQ(W0().collective_seq, 41);
  EXPECT_EQ(W0().collective_kind, "reduce_scatter");
  EXPECT_FALSE(W0().in_collective);
}

TEST_F(AgentAnatomyTest, AnImpossibleCollectiveMarkIsRefused) {
  struct Bad {
    int64_t seq;
    std::string kind;
    bool inside;
    const char* field;
  };
  const Bad bad[] = {
      {-2, "", false, "collective_seq=-2"},
      {8, "allreduce; rm -rf /", true, "collective_kind="},
      {8, "", true, "collective_kind=''"},            // a collective entered has a kind
      {-1, "barrier", false, "collective_kind='barrier'"},  // a kind with none entered
      {-1, "", true, "in_collective"},
  };
  int64_t gen = 0;
  for (const Bad& b : bad) {
    StartGeneration(++gen);
    Tick(gen, 7, "allgather", true);
    LogLines log;
    Tick(gen, b.seq, b.kind, b.inside);
    EXPECT_EQ(W0().collective_seq, 7) << b.field;
    EXPECT_EQ(W0().collective_kind, "allgather") << b.field;
    EXPECT_TRUE(W0().in_collective) << b.field;
    EXPECT_EQ(log.Count({"a1-w0", "refused", b.field}), 1u) << b.field << "; log:\n"
                                                            << ::testing::PrintToString(log.All());
  }
}

TEST(AgentAnatomyChecks, StepAnatomyBounds) {
  StepMessage m;
  m.step = 3;
  m.step_seconds = 2;
  m.compute_seconds = 1.5;
  m.wait_seconds = 0.5;
  EXPECT_TRUE(CheckStepAnatomy(m).ok());
  m.wait_seconds = 0.5 + 1e-3;
  EXPECT_FALSE(CheckStepAnatomy(m).ok()) << "1 ms over a 2 s step is no rounding";
  m.wait_seconds = 0;
  m.compute_seconds = m.step_seconds = kMaxTimedStepSeconds;
  EXPECT_TRUE(CheckStepAnatomy(m).ok()) << "the bound itself";
  m.step_seconds = std::nextafter(kMaxTimedStepSeconds, 1e300);
  EXPECT_FALSE(CheckStepAnatomy(m).ok());
}

}  // namespace
}  // namespace elastrain
