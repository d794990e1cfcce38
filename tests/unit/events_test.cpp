// The typed events of events.jsonl (wire/events.h): every event round-trips, old field
// names still read, damaged lines are refused without throwing, EventLog writes what
// DecodeEvent reads, and docs/observability.md's event table matches the structs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/events.h"
#include "test_dirs.h"
#include "wire/events.h"

namespace elastrain {
namespace {

std::string SourceDir() {
  if (const char* env = std::getenv("ELASTRAIN_SOURCE_DIR")) return env;
  return ELASTRAIN_SOURCE_DIR_DEFAULT;
}

WorkerEndFields EndFields(bool exited) {
  WorkerEndFields f;
  f.generation = 3;
  f.rank = 1;
  f.worker = "a1-w0";
  f.host = "h1";
  f.pid = 4242;
  f.reason = "worker rank 1 (pid 4242) on host h1 exited with code 1";
  f.step = 57;
  if (exited) {
    f.detected_at = 1700000100.25;
    f.exit_code = 1;
    f.signal = 9;
  }
  return f;
}

// One of every event, every field (optional ones included) away from its default.
std::vector<AnyEvent> Samples() {
  RestoreChoice peers{"peers", std::nullopt, 40, 2, std::vector<ShardSource>{{0, 1}, {1, 0}}, std::nullopt, "all held"};
  RestoreChoice full{"memory", 2, 40, 1, std::vector<ShardSource>{{0, 2}}, 39, "every field"};
  return {
      JobSubmittedEvent{"controller", "job-1", "/runs/r", "2:4", 3, 64},
      ControllerResumedEvent{"controller", "job-1", "RUNNING", 2, 80},
      HeadElectedEvent{"controller", "h2:4242", "http://10.0.0.2:8080", "h1:4141", 3.5},
      HeadLostEvent{"controller", "h1:4141", "its lease ended; h2:4242 leads"},
      JobStateEvent{"controller", "RUNNING", "RECOVERING", "worker rank 1 failed", 2, 80, 1},
      GenerationStartedEvent{"controller", 2, 4, {2, 2, 1}, full, {{0, "a0-w0", "h0", 100}, {1, "a1-w0", "h1", 101}}},
      GenerationStartedEvent{"controller", 3, 2, {1, 2, 1}, peers, {}},
      GenerationFirstStepEvent{"controller", 2, 1700000010.5, 1700000010.0, 41, 40, 4, 3.25},
      GenerationFirstStepEvent{"controller", 0, 1700000001.5, 1700000001.0, 1, 0, 4, std::nullopt},
      GenerationStalledEvent{"controller", 2, 61.5, 80, "no rank completed a step"},
      GenerationFailedEvent{"controller", 2, "rank 1 failed", 1, 3, 80},
      ResizeRequestedEvent{"controller", 2, 2, 4, "2 idle workers"},
      StopRequestedEvent{"controller", 2, 80},
      StragglersKilledEvent{"controller", 2, 1, "1 rank still running"},
      HostCooldownEvent{"controller", "h1", 2, 1700000200.5, "2 failures"},
      CooldownOverriddenEvent{"controller", "no other host can run min_workers"},
      StragglerDetectedEvent{"controller", 3, 1, "a2-w0", "h2", 2.1, 0.84, 0.4, 40, 52, "exclude"},
      StragglerClearedEvent{"controller", 3, 1, "a2-w0", "h2", 1.02, 80, "back to pace"},
      HostExcludedEvent{"controller", "h2", "straggler: rank 1 2.1x the median", 1700000500, 3, 52, 2.1, 120.5, 1.8},
      HostHealthEvent{"controller", "h3", "a3", false, "/bin/check", "exit 1: disk full", 40.5, 9.5},
      HangDiagnosedEvent{"controller", 4, "silent_rank", {2}, {"h2"},
                         {{0, "a1-w0", "h1", 17, "allreduce", true, 0.2}, {2, "a2-w1", "h2", 17, "allreduce", true, 6.5}},
                         "rank 2 on h2 sent nothing for 6.5s"},
      WorkerErrorEvent{EndFields(true)},
      WorkerAbortedEvent{EndFields(true)},
      WorkerPreemptedEvent{EndFields(true)},
      WorkerHungEvent{EndFields(true)},
      WorkerTerminatedEvent{EndFields(true)},
      WorkerFailedEvent{EndFields(true)},
      HostLostEvent{EndFields(true)},
      StateRestoredEvent{2, 40, 4, "peers", 0.75},
      MemoryRestoredEvent{2, 40, "peers", 1, 3, 1, {2, 1}, {{0, 1}, {1, 0}}, 0.5},
      PeerRestoreAbandonedEvent{2, "rank 3 holds no copy"},
      StepLineRecoveredEvent{2, 40, 1, 3},
      StepsRedoneEvent{2, 40, 57},
      CheckpointSavedEvent{60, 2, "/runs/r/checkpoints/step_60", 1.5, 0.25, 0.125, 0.1, 0.025, 1.75},
      CheckpointFailedEvent{60, "disk full"},
      CheckpointRestoredEvent{60, "/runs/r/checkpoints/step_60", 0.5, true},
      CheckpointRestoreFallbackEvent{"/runs/r/checkpoints/step_60", "bad checksum", "/runs/r/checkpoints/step_40"},
      CheckpointPeriodChangedEvent{20, 35, 2, 1, 3600, 1.5, 0.2, "save_measured", 2, 60},
      MemorySnapshotPeriodChangedEvent{2, 7, 3, 240.5, 0.045, 0.25, 12.5, "copy_measured", 1, 30},
  };
}

// Each event's fields as written, by name (from the samples, whose optionals are set).
std::map<std::string, std::set<std::string>> FieldsByEvent() {
  std::map<std::string, std::set<std::string>> out;
  for (const AnyEvent& e : Samples()) {
    std::set<std::string>& keys = out[std::string(EventName(e))];
    const nlohmann::json line = EncodeEvent(e, 1);
    for (const auto& [k, v] : line.items())
      if (k != "time" && k != "event") keys.insert(k);
  }
  return out;
}

TEST(Events, SamplesCoverEveryEvent) {
  std::set<std::string> sampled, all;
  for (const AnyEvent& e : Samples()) sampled.insert(std::string(EventName(e)));
  for (std::string_view n : AllEventNames()) all.insert(std::string(n));
  EXPECT_EQ(sampled, all);
  EXPECT_EQ(all.size(), std::variant_size_v<AnyEvent>) << "two events share a name";
}

TEST(Events, EveryEventRoundTrips) {
  for (const AnyEvent& e : Samples()) {
    const nlohmann::json line = EncodeEvent(e, 1700000000.5);
    EXPECT_EQ(line["event"], std::string(EventName(e)));
    const auto back = DecodeEventLine(line.dump());
    ASSERT_TRUE(back.ok()) << EventName(e) << ": " << back.status().ToString();
    EXPECT_EQ(back->time, 1700000000.5);
    EXPECT_TRUE(back->event == e) << EventName(e) << ": " << line.dump();
  }
}

TEST(Events, DefaultsRoundTripAndOptionalsAreLeftOut) {
  for (const AnyEvent& sample : Samples()) {
    const AnyEvent e = std::visit([](const auto& x) -> AnyEvent { return std::decay_t<decltype(x)>{}; }, sample);
    const nlohmann::json line = EncodeEvent(e, 5);
    const auto back = DecodeEvent(line);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_TRUE(back->event == e) << line.dump();
  }
  const nlohmann::json first = EncodeEvent(GenerationFirstStepEvent{}, 5);
  EXPECT_FALSE(first.contains("recovery_seconds")) << first.dump();
  const nlohmann::json error = EncodeEvent(WorkerErrorEvent{}, 5);
  EXPECT_FALSE(error.contains("exit_code") || error.contains("signal") || error.contains("detected_at")) << error.dump();
  const nlohmann::json started = EncodeEvent(GenerationStartedEvent{}, 5);
  EXPECT_FALSE(started["restore"].contains("step")) << started.dump();
}

TEST(Events, OldStepTimeReadsAsFirstStepTime) {
  // A line of a run before first_step_time: step_time was the wall time of the first step.
  const auto old = DecodeEventLine(
      R"({"event":"generation_first_step","time":110.5,"generation":1,"step_time":110.25,"step_started":110.0,)"
      R"("step":41,"start_step":40,"world":2,"source":"controller","recovery_seconds":3.5})");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  const auto* e = EventAs<GenerationFirstStepEvent>(old.value());
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->first_step_time, 110.25);
  EXPECT_EQ(e->recovery_seconds, 3.5);
  // The new name wins when both are there; step_time is never written.
  const auto both = DecodeEventLine(R"({"event":"generation_first_step","first_step_time":7,"step_time":9})");
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(EventAs<GenerationFirstStepEvent>(both.value())->first_step_time, 7);
  EXPECT_FALSE(EncodeEvent(*e, 1).contains("step_time"));
}

TEST(Events, OlderLinesWithFewerFieldsKeepDefaults) {
  // The launched worker's checkpoint_saved before the structs: five fields.
  const auto r = DecodeEventLine(
      R"({"event":"checkpoint_saved","time":5,"step":20,"generation":1,"dir":"","write_seconds":2,"stall_seconds":2})");
  ASSERT_TRUE(r.ok());
  CheckpointSavedEvent want;
  want.step = 20, want.generation = 1, want.write_seconds = 2, want.stall_seconds = 2;
  EXPECT_TRUE(*EventAs<CheckpointSavedEvent>(r.value()) == want);
}

TEST(Events, DamagedLinesAreRefusedWithoutThrowing) {
  const std::vector<std::pair<std::string, StatusCode>> cases = {
      {"", StatusCode::kCorruption},
      {"not json", StatusCode::kCorruption},
      {"[1,2]", StatusCode::kCorruption},
      {"42", StatusCode::kCorruption},
      {R"({"time":1})", StatusCode::kCorruption},                                      // no name
      {R"({"event":7})", StatusCode::kCorruption},                                     // a name of another type
      {R"({"event":"job_state","to":42})", StatusCode::kCorruption},                   // a field of another type
      {R"({"event":"job_state","time":"soon"})", StatusCode::kCorruption},             // a time of another type
      {R"({"event":"job_state","generation":1.5})", StatusCode::kCorruption},          // not an integer
      {R"({"event":"job_state","generation":1e300})", StatusCode::kCorruption},        // out of range
      {R"({"event":"generation_started","world":99999999999})", StatusCode::kCorruption},
      {R"({"event":"generation_started","restore":5})", StatusCode::kCorruption},
      {R"({"event":"generation_started","members":[{"rank":"x"}]})", StatusCode::kCorruption},
      {R"({"event":"worker_failed","exit_code":"one"})", StatusCode::kCorruption},
      {R"({"event":"a_future_event","time":1})", StatusCode::kNotFound},               // unknown: skipped
      {R"({"event":"job_state")", StatusCode::kCorruption},                            // a cut line
  };
  for (const auto& [text, code] : cases) {
    Result<EventRecord> r = Status::Internal("not decoded");
    ASSERT_NO_THROW(r = DecodeEventLine(text)) << text;
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), code) << text << ": " << r.status().ToString();
    EXPECT_FALSE(r.status().message().empty());
  }
  // The message names the event and the field.
  const auto r = DecodeEventLine(R"({"event":"job_state","generation":1.5})");
  EXPECT_NE(r.status().message().find("job_state"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("generation"), std::string::npos) << r.status().message();
}

TEST(Events, NullAndExtraFieldsAreTolerated) {
  // NaN is written as null; a newer writer's extra fields are ignored.
  const auto r = DecodeEventLine(
      R"({"event":"checkpoint_period_changed","time":3,"to":30,"mtti_seconds":null,"a_new_field":[1]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto* e = EventAs<CheckpointPeriodChangedEvent>(r.value());
  EXPECT_EQ(e->to, 30);
  EXPECT_TRUE(std::isnan(e->mtti_seconds));
}

TEST(Events, WorkerExitEventsAreNamedAsTheVocabularyNamesThem) {
  for (ExitKind k : {ExitKind::kNone, ExitKind::kFailure, ExitKind::kPreempted, ExitKind::kHung, ExitKind::kEnded,
                     ExitKind::kSuccess})
    EXPECT_EQ(EventName(WorkerExitEvent(k, EndFields(true))), ExitEventName(k));
}

TEST(Events, EventLogWritesWhatDecodeReads) {
  ScopedTempDir dir("events");
  const std::string path = dir.path() + "/events.jsonl";
  {
    EventLog log;
    ASSERT_TRUE(log.Open(path).ok());
    for (const AnyEvent& e : Samples()) std::visit([&](const auto& x) { log.Emit(x); }, e);
  }
  std::ifstream in(path);
  std::string line;
  const std::vector<AnyEvent> want = Samples();
  size_t i = 0;
  while (std::getline(in, line)) {
    ASSERT_LT(i, want.size());
    const auto r = DecodeEventLine(line);
    ASSERT_TRUE(r.ok()) << line << ": " << r.status().ToString();
    EXPECT_GT(r->time, 1e9) << "the wall time";
    EXPECT_TRUE(r->event == want[i]) << line;
    ++i;
  }
  EXPECT_EQ(i, want.size());
}

// docs/observability.md's table: a row per event, with exactly its struct's fields.
TEST(Events, DocsTableMatchesTheStructs) {
  std::ifstream in(SourceDir() + "/docs/observability.md");
  ASSERT_TRUE(in) << SourceDir() << "/docs/observability.md";
  std::string line;
  bool in_section = false;
  std::map<std::string, std::set<std::string>> documented;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line.rfind("## Events", 0) == 0;
    if (!in_section || line.rfind("| `", 0) != 0) continue;
    // | `name` | written by | `a`, `b` ... |   or   | `name` | written by | as `other` |
    std::vector<std::string> cells;
    std::stringstream ss(line.substr(1));
    for (std::string c; std::getline(ss, c, '|');) cells.push_back(c);
    ASSERT_GE(cells.size(), 3u) << line;
    auto ticked = [](const std::string& c) {
      std::vector<std::string> out;
      for (size_t a = c.find('`'); a != std::string::npos; a = c.find('`', a + 1)) {
        const size_t b = c.find('`', a + 1);
        if (b == std::string::npos) break;
        out.push_back(c.substr(a + 1, b - a - 1));
        a = b;
      }
      return out;
    };
    const std::vector<std::string> name = ticked(cells[0]);
    ASSERT_EQ(name.size(), 1u) << line;
    const std::vector<std::string> fields = ticked(cells[2]);
    const bool same_as = cells[2].find(" as `") == 0 || cells[2].find("as `") == 0;
    if (same_as) {
      ASSERT_EQ(fields.size(), 1u) << line;
      ASSERT_TRUE(documented.count(fields[0])) << line << ": `as` names an event not in a row above";
      documented[name[0]] = documented[fields[0]];
    } else {
      documented[name[0]] = std::set<std::string>(fields.begin(), fields.end());
    }
  }
  const auto structs = FieldsByEvent();
  for (const auto& [name, fields] : documented) {
    const auto it = structs.find(name);
    ASSERT_NE(it, structs.end()) << "docs/observability.md names an event no struct has: " << name;
    EXPECT_EQ(fields, it->second) << "the fields of " << name << " in docs/observability.md";
  }
  for (const auto& [name, fields] : structs)
    EXPECT_TRUE(documented.count(name)) << name << " has no row in docs/observability.md's event table";
}

}  // namespace
}  // namespace elastrain
