// Goodput accounting, the Prometheus exposition and the JSONL tail (the API token and
// requests: api_security_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "monitor/goodput.h"
#include "monitor/prometheus.h"
#include "monitor/run_view.h"
#include "test_dirs.h"

namespace elastrain {
namespace {

using nlohmann::json;

json State(double t, const char* from, const char* to, int64_t gen) {
  return {{"time", t}, {"event", "job_state"}, {"from", from}, {"to", to}, {"generation", gen}};
}
json Started(double t, int64_t gen, int world, int64_t restore) {
  return {{"time", t}, {"event", "generation_started"}, {"generation", gen}, {"world", world},
          {"restore", {{"kind", "checkpoint"}, {"step", restore}}}};
}
json FirstStep(double t, int64_t gen, double began, int64_t start) {
  return {{"time", t}, {"event", "generation_first_step"}, {"generation", gen}, {"step_started", began},
          {"start_step", start}};
}
json Step(int64_t gen, int64_t step, double wall) {
  return {{"step", step}, {"loss", 1.0}, {"generation", gen}, {"wall_time", wall}};
}

// A job that fails once, waits for resources, resumes from an older checkpoint
// (redoing 5 steps) and succeeds. Every figure below is worked out by hand.
struct FailureTimeline {
  std::vector<json> events, metrics;
  FailureTimeline() {
    events = {{{"time", 100.0}, {"event", "job_submitted"}},
              State(101, "PENDING", "RUNNING", 0),
              Started(101, 0, 2, 0),
              FirstStep(104, 0, 103, 0),
              {{"time", 108.5}, {"event", "checkpoint_saved"}, {"step", 5}, {"stall_seconds", 0.5}},
              {{"time", 115.0}, {"event", "generation_failed"}, {"generation", 0}, {"step", 10}},
              State(115, "RUNNING", "RECOVERING", 0),
              State(115, "RECOVERING", "WAITING_FOR_RESOURCES", 0),
              Started(120, 1, 1, 5),
              State(120, "WAITING_FOR_RESOURCES", "RUNNING", 1),
              FirstStep(123, 1, 122, 5),
              State(138, "RUNNING", "SUCCEEDED", 1)};
    for (int s = 1; s <= 10; ++s) metrics.push_back(Step(0, s, 103 + s));  // steps 1..10 at 104..113
    for (int s = 6; s <= 20; ++s) metrics.push_back(Step(1, s, 117 + s));  // steps 6..20 at 123..137
  }
};

TEST(Goodput, AStateThisVersionDoesNotKnowIsSkipped) {
  // events.jsonl is read as hostile input: an unknown or non-string state changes nothing.
  FailureTimeline f;
  const GoodputBreakdown want = ComputeGoodput(f.events, f.metrics, /*now=*/1000);
  f.events.insert(f.events.begin() + 2, State(102, "RUNNING", "EXPLODED", 0));
  f.events.insert(f.events.begin() + 3, {{"time", 103.0}, {"event", "job_state"}, {"to", 42}});
  const GoodputBreakdown g = ComputeGoodput(f.events, f.metrics, /*now=*/1000);
  EXPECT_EQ(g.state, "SUCCEEDED");
  EXPECT_DOUBLE_EQ(g.total(), want.total());
  EXPECT_EQ(g.generations.size(), want.generations.size());
}

TEST(Goodput, CategoriesOfAFailureWaitAndRedoneSteps) {
  FailureTimeline f;
  const GoodputBreakdown g = ComputeGoodput(f.events, f.metrics, /*now=*/1000);
  EXPECT_TRUE(g.finished);
  EXPECT_EQ(g.state, "SUCCEEDED");
  EXPECT_DOUBLE_EQ(g.wall(), 38);
  EXPECT_NEAR(g.total(), g.wall(), 1e-9);
  EXPECT_NEAR(g.at(TimeCategory::kInit), 3, 1e-9);         // 100..103
  EXPECT_NEAR(g.at(TimeCategory::kWaiting), 5, 1e-9);      // 115..120
  EXPECT_NEAR(g.at(TimeCategory::kRecovery), 2, 1e-9);     // 120..122
  EXPECT_NEAR(g.at(TimeCategory::kCheckpoint), 0.5, 1e-9); // the stall
  // The lost tail of generation 0 (113..115) and steps 6..10 again (122..127).
  EXPECT_NEAR(g.at(TimeCategory::kRedone), 2 + 5, 1e-9);
  EXPECT_NEAR(g.at(TimeCategory::kProductive), 9.5 + 10 + 1, 1e-9);
  EXPECT_EQ(g.redone_steps, 5);
  ASSERT_EQ(g.recoveries.size(), 1u);
  EXPECT_NEAR(g.recoveries[0], 2, 1e-9);
  EXPECT_NEAR(g.worker_seconds, 2 * 14 + 1 * 18, 1e-9);
  EXPECT_NEAR(g.goodput(), 20.5 / 38, 1e-9);
  // The timeline tiles the wall time in order.
  ASSERT_FALSE(g.spans.empty());
  EXPECT_DOUBLE_EQ(g.spans.front().begin, 100);
  EXPECT_DOUBLE_EQ(g.spans.back().end, 138);
  for (size_t i = 1; i < g.spans.size(); ++i) EXPECT_NEAR(g.spans[i].begin, g.spans[i - 1].end, 1e-9);
}

TEST(Goodput, ARunningJobEndsNow) {
  FailureTimeline f;
  f.events.pop_back();  // not SUCCEEDED yet
  const GoodputBreakdown g = ComputeGoodput(f.events, f.metrics, /*now=*/140);
  EXPECT_FALSE(g.finished);
  EXPECT_EQ(g.state, "RUNNING");
  EXPECT_DOUBLE_EQ(g.wall(), 40);
  EXPECT_NEAR(g.total(), 40, 1e-9);
  // 137..140 after the last logged step is still training.
  EXPECT_NEAR(g.at(TimeCategory::kProductive), 9.5 + 10 + 3, 1e-9);
}

TEST(Goodput, RedoneStepsAreInterpolatedBetweenLogPeriods) {
  const double t = 1000;  // wall times are seconds since the epoch; 0 means "never"
  std::vector<json> events = {{{"time", t}, {"event", "job_submitted"}},
                              State(t, "PENDING", "RUNNING", 0),
                              Started(t, 0, 1, 0),
                              FirstStep(t + 1, 0, t + 0.5, 0),
                              State(t + 10, "RUNNING", "RECOVERING", 0),
                              Started(t + 10, 1, 1, 0),
                              State(t + 10, "RECOVERING", "RUNNING", 1),
                              FirstStep(t + 13, 1, t + 12, 0),
                              State(t + 40, "RUNNING", "SUCCEEDED", 1)};
  // Generation 0 reached step 10; generation 1 restarted from 0, logging every 4 steps.
  std::vector<json> metrics = {Step(0, 10, t + 9), Step(1, 8, t + 20), Step(1, 12, t + 24), Step(1, 16, t + 28)};
  const GoodputBreakdown g = ComputeGoodput(events, metrics, t + 100);
  // The lost tail t+9..t+10; then step 10 of generation 1 completes half way between
  // its logged steps 8 (t+20) and 12 (t+24).
  EXPECT_NEAR(g.at(TimeCategory::kRedone), 1 + (22 - 12), 1e-9);
  EXPECT_NEAR(g.at(TimeCategory::kInit), 0.5, 1e-9);
  EXPECT_NEAR(g.at(TimeCategory::kRecovery), 2, 1e-9);
  EXPECT_EQ(g.redone_steps, 10);
  EXPECT_NEAR(g.total(), 40, 1e-9);
}

// Generation 1 restores the checkpoint of step 5 and redoes steps 6..10, which have
// their lines already: it writes none for them, and its chief says when it caught up.
TEST(Goodput, RedoneStepsWithoutSecondLinesEndAtStepsRedone) {
  FailureTimeline f;
  f.metrics.erase(std::remove_if(f.metrics.begin(), f.metrics.end(),
                                 [](const json& m) { return m["generation"] == 1 && m["step"] <= 10; }),
                  f.metrics.end());
  // Step 10 was done again at 126.5 (interpolating over step 11's line would say 127).
  f.events.insert(f.events.end() - 1, json({{"time", 126.5}, {"event", "steps_redone"}, {"generation", 1},
                                            {"from", 5}, {"to", 10}}));
  const GoodputBreakdown g = ComputeGoodput(f.events, f.metrics, /*now=*/1000);
  EXPECT_EQ(g.redone_steps, 5);
  EXPECT_NEAR(g.at(TimeCategory::kRedone), 2 + 4.5, 1e-9);  // 0's lost tail, then 122..126.5
  EXPECT_NEAR(g.at(TimeCategory::kProductive), 9.5 + 10.5 + 1, 1e-9);
  EXPECT_NEAR(g.total(), g.wall(), 1e-9);
}

// The chief's state_restored names the step restored; the controller's plan may not
// (a checkpoint plan names none).
TEST(Goodput, TheStartStepIsTheOneRestored) {
  FailureTimeline f;
  f.events[8] = {{"time", 120.0}, {"event", "generation_started"}, {"generation", 1}, {"world", 1},
                 {"restore", {{"kind", "checkpoint"}}}};
  f.events[10] = {{"time", 123.0}, {"event", "generation_first_step"}, {"generation", 1}, {"step_started", 122.0}};
  f.events.insert(f.events.begin() + 10,
                  json({{"time", 121.0}, {"event", "state_restored"}, {"generation", 1}, {"step", 5}}));
  const GoodputBreakdown g = ComputeGoodput(f.events, f.metrics, /*now=*/1000);
  ASSERT_EQ(g.generations.size(), 2u);
  EXPECT_EQ(g.generations[1].start_step, 5);
  EXPECT_EQ(g.redone_steps, 5);
}

// A generation that fails while redoing steps writes no line: the steps it reached
// (generation_failed) count, and all its time is redone.
TEST(Goodput, AGenerationThatFailedWhileRedoingCountsTheStepsItReached) {
  const double t = 1000;
  std::vector<json> events = {{{"time", t}, {"event", "job_submitted"}},
                              State(t, "PENDING", "RUNNING", 0),
                              Started(t, 0, 1, 0),
                              FirstStep(t + 1, 0, t + 0.5, 0),
                              {{"time", t + 10}, {"event", "generation_failed"}, {"generation", 0}, {"step", 10}},
                              State(t + 10, "RUNNING", "RECOVERING", 0),
                              Started(t + 10, 1, 1, 4),
                              State(t + 10, "RECOVERING", "RUNNING", 1),
                              FirstStep(t + 12, 1, t + 11, 4),
                              {{"time", t + 14}, {"event", "generation_failed"}, {"generation", 1}, {"step", 7}},
                              State(t + 14, "RUNNING", "RECOVERING", 1)};
  std::vector<json> metrics;
  for (int s = 1; s <= 10; ++s) metrics.push_back(Step(0, s, t + s - 0.5));
  const GoodputBreakdown g = ComputeGoodput(events, metrics, t + 20);
  ASSERT_EQ(g.generations.size(), 2u);
  EXPECT_EQ(g.generations[1].redone_steps, 3);
  EXPECT_NEAR(g.at(TimeCategory::kRedone), 0.5 + 3, 1e-9);  // 0's lost tail, then all of 1's training
}

TEST(Goodput, AResizeTailIsTheStopStepSave) {
  std::vector<json> events = {{{"time", 500.0}, {"event", "job_submitted"}}, State(500, "PENDING", "RUNNING", 0),
                              Started(500, 0, 2, 0), FirstStep(502, 0, 501, 0), State(510, "RUNNING", "RESIZING", 0)};
  std::vector<json> metrics = {Step(0, 5, 506), Step(0, 8, 509)};
  const GoodputBreakdown g = ComputeGoodput(events, metrics, 512);
  EXPECT_NEAR(g.at(TimeCategory::kCheckpoint), 1, 1e-9);  // 9..10
  EXPECT_NEAR(g.at(TimeCategory::kRecovery), 2, 1e-9);    // 10..12, RESIZING
  EXPECT_NEAR(g.at(TimeCategory::kProductive), 8, 1e-9);
  EXPECT_EQ(g.state, "RESIZING");
}

TEST(Goodput, NoEventsGiveAnEmptyBreakdown) {
  const GoodputBreakdown g = ComputeGoodput({}, {}, 10);
  EXPECT_EQ(g.wall(), 0);
  EXPECT_EQ(g.total(), 0);
  EXPECT_EQ(g.goodput(), 0);
}

// A launched program that reports no steps: its goodput is unknown (NaN), not 0; one
// that reports them gets its ratio.
TEST(Prometheus, GoodputOfALaunchedProgramWithoutStepReportsIsNaN) {
  FailureTimeline f;
  RunSnapshot run;
  run.events = f.events;
  run.goodput = ComputeGoodput(run.events, {}, 1000);
  json status = {{"job", "j"}, {"state", "RUNNING"}, {"launched", true}, {"run_dir", "/r"}};
  EXPECT_NE(RenderPrometheus(status, run).find("\nelastrain_goodput_ratio NaN\n"), std::string::npos)
      << RenderPrometheus(status, run);
  run.metrics = f.metrics;
  run.goodput = ComputeGoodput(run.events, run.metrics, 1000);
  ASSERT_GT(run.goodput.goodput(), 0);
  EXPECT_NE(RenderPrometheus(status, run).find("\nelastrain_goodput_ratio 0."), std::string::npos)
      << RenderPrometheus(status, run);
  status["launched"] = false;  // the trainer: 0 is a measurement (nothing productive yet)
  run.metrics.clear();
  EXPECT_EQ(RenderPrometheus(status, run).find("elastrain_goodput_ratio NaN"), std::string::npos);
}

TEST(Prometheus, FamiliesHaveHelpTypeAndCumulativeBuckets) {
  FailureTimeline f;
  RunSnapshot run;
  run.events = f.events;
  run.metrics = f.metrics;
  run.metrics.push_back({{"step", 20}, {"eval_loss", 2.5}});
  run.events.push_back({{"time", 130.0}, {"event", "checkpoint_saved"}, {"write_seconds", 3.0}, {"stall_seconds", 0.0}});
  run.goodput = ComputeGoodput(run.events, run.metrics, 1000);
  json status = {{"job", "j\"1"}, {"state", "SUCCEEDED"}, {"step", 20}, {"steps", 20}, {"generation", 1},
                 {"world", 1}, {"failures", 1}, {"restarts", 1}, {"latest_checkpoint_step", 15},
                 {"checkpoint_period", 5}, {"cost_per_worker_hour", 3.6}, {"run_dir", "/r"}};
  const std::string text = RenderPrometheus(status, run);
  EXPECT_NE(text.find("elastrain_job_info{job_id=\"j\\\"1\",run_dir=\"/r\""), std::string::npos) << text;
  EXPECT_NE(text.find("elastrain_job_state{state=\"SUCCEEDED\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("elastrain_job_state{state=\"RUNNING\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE elastrain_failures_total counter\nelastrain_failures_total 1\n"), std::string::npos);
  EXPECT_NE(text.find("elastrain_eval_loss 2.5\n"), std::string::npos);
  EXPECT_NE(text.find("elastrain_checkpoint_age_steps 5\n"), std::string::npos);
  // Two saves (0 s and 3 s write): buckets are cumulative and end at the count.
  EXPECT_NE(text.find("elastrain_checkpoint_save_seconds_bucket{le=\"0.01\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("elastrain_checkpoint_save_seconds_bucket{le=\"5\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("elastrain_checkpoint_save_seconds_count 2\n"), std::string::npos);
  EXPECT_NE(text.find("elastrain_recovery_seconds_bucket{le=\"2\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("elastrain_recovery_seconds_sum 2\n"), std::string::npos);
  EXPECT_NE(text.find("elastrain_time_seconds_total{category=\"waiting\"} 5\n"), std::string::npos);
  // 46 worker-seconds at $3.6 per worker-hour.
  EXPECT_NE(text.find("elastrain_estimated_cost_usd 0.046"), std::string::npos);
  // Every sample belongs to a family announced by # TYPE.
  size_t samples = 0;
  std::istringstream in(text);
  std::string line, family;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) family = line.substr(7, line.find(' ', 7) - 7);
    if (line.empty() || line[0] == '#') continue;
    ++samples;
    EXPECT_EQ(line.rfind(family, 0), 0u) << line << " outside " << family;
  }
  EXPECT_GT(samples, 40u);
}

TEST(Prometheus, AnAutoPeriodIsTheLatestChoice) {
  RunSnapshot run;
  run.events = {{{"time", 1.0}, {"event", "checkpoint_period_changed"}, {"from", 10}, {"to", 36}},
                {{"time", 2.0}, {"event", "checkpoint_period_changed"}, {"from", 36}, {"to", 25}}};
  const std::string text = RenderPrometheus({{"job", "j"}, {"checkpoint_period", 10}}, run);
  EXPECT_NE(text.find("elastrain_checkpoint_period_steps 25\n"), std::string::npos) << text;
}

TEST(Prometheus, TheRamTiersAutoPeriodIsTheLatestChoiceAndOnlyWithAuto) {
  RunSnapshot run;
  const json job = {{"job", "j"}};
  EXPECT_EQ(RenderPrometheus(job, run).find("memory_snapshot_period_steps"), std::string::npos);
  run.events = {{{"time", 1.0}, {"event", "memory_snapshot_period_changed"}, {"from", -1}, {"to", 2}},
                {{"time", 2.0}, {"event", "memory_snapshot_period_changed"}, {"from", 2}, {"to", 0}}};
  const std::string text = RenderPrometheus(job, run);
  EXPECT_NE(text.find("elastrain_memory_snapshot_period_steps 0\n"), std::string::npos) << text;
}

TEST(Prometheus, NoJobStillRenders) {
  const std::string text = RenderPrometheus(json::object(), RunSnapshot());
  EXPECT_NE(text.find("elastrain_job_state{state=\"RUNNING\"} 0"), std::string::npos);
  EXPECT_EQ(text.find("elastrain_job_info{"), std::string::npos);
}

TEST(JsonlTail, ReadsCompleteLinesAndStartsOverWhenTheFileShrinks) {
  ScopedTempDir dir("tail");
  const std::string path = dir.path() + "/e.jsonl";
  JsonlTail tail(path);
  tail.Refresh();  // no file yet
  EXPECT_TRUE(tail.records().empty());
  {
    std::ofstream o(path);
    o << "{\"a\":1}\n{\"a\":2}\n{\"a\":";
  }
  tail.Refresh();
  ASSERT_EQ(tail.records().size(), 2u);
  {
    std::ofstream o(path, std::ios::app);
    o << "3}\nnot json\n";
  }
  tail.Refresh();
  ASSERT_EQ(tail.records().size(), 3u);
  EXPECT_EQ(tail.records()[2]["a"], 3);
  {
    std::ofstream o(path);
    o << "{\"b\":1}\n";
  }
  tail.Refresh();
  ASSERT_EQ(tail.records().size(), 1u);
  EXPECT_EQ(tail.records()[0]["b"], 1);
}

}  // namespace
}  // namespace elastrain
