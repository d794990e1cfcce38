// A step's metrics.jsonl line (train/step_line.h) and how a chief that resumes the file
// reads it back: the newest logged steps, and a torn last line cut (common/metrics.h).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "common/metrics.h"
#include "test_dirs.h"
#include "train/step_line.h"

namespace elastrain {
namespace {

TEST(StepLine, HasTheFieldsOfAMetricsLine) {
  StepLine l;
  l.step = 12;
  l.loss = 4.5;
  l.generation = 3;
  const nlohmann::json j = l.ToJson();
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"step", "loss", "lr", "grad_norm", "step_time", "comm_time",
                                         "checkpoint_stall", "checkpoint_wait", "tokens_per_sec", "mfu",
                                         "generation", "world_size", "time", "wall_time"}));
  EXPECT_EQ(j["step"], 12);
  EXPECT_EQ(j["generation"], 3);
  EXPECT_DOUBLE_EQ(j["loss"].get<double>(), 4.5);
}

TEST(NewestLoggedSteps, TrainingAndEvalLinesApart) {
  const std::string text =
      "{\"step\":0,\"eval_loss\":5.5}\n"
      "{\"step\":9,\"loss\":5.0}\n"
      "{\"step\":10,\"loss\":null}\n"  // NaN is written as null: still the step's line
      "{\"step\":10,\"eval_loss\":4.9}\n";
  const LoggedSteps s = NewestLoggedSteps(text, 100);
  EXPECT_EQ(s.train, 10);
  EXPECT_EQ(s.eval, 10);
  EXPECT_EQ(NewestLoggedSteps("", 100).train, -1);
  EXPECT_EQ(NewestLoggedSteps("", 100).eval, -1);
}

TEST(NewestLoggedSteps, SkipsWhatIsNotALineOfThisRun) {
  const std::string text =
      "ep\":7,\"loss\":1}\n"                     // the tail began mid-line
      "{\"step\":8,\"loss\":1}\n"
      "{\"step\":\"99\",\"loss\":1}\n"           // a string
      "{\"step\":99.5,\"loss\":1}\n"             // not an integer
      "{\"step\":-3,\"loss\":1}\n"
      "{\"step\":1000000000000,\"loss\":1}\n"    // beyond the run's steps
      "[{\"step\":50,\"loss\":1}]\n"             // not an object
      "{\"step\":60,\"lr\":1}\n"                 // neither kind of line
      "{\"step\":70,\"loss\":1";                 // torn
  const LoggedSteps s = NewestLoggedSteps(text, 100);
  EXPECT_EQ(s.train, 8);
  EXPECT_EQ(s.eval, -1);
}

// Writes `text` as `name` under `dir`, opens it to resume and trims it.
std::string Trimmed(const std::string& dir, const std::string& name, const std::string& text, size_t tail_bytes,
                    std::string* tail) {
  const std::string path = dir + "/" + name;
  EXPECT_TRUE(WriteFileAtomic(path, text).ok());
  MetricsWriter w;
  EXPECT_TRUE(w.Open(path, /*append=*/true).ok());
  auto t = w.TrimTornTail(tail_bytes);
  EXPECT_TRUE(t.ok()) << t.status().message();
  if (t.ok()) *tail = t.value();
  EXPECT_TRUE(w.Write({{"step", 3}}).ok());
  return ReadFile(path).value();
}

TEST(MetricsWriterTrim, CutsATornLastLineSoTheNextStartsOnItsOwn) {
  ScopedTempDir dir("metrics_trim");
  std::string tail;
  EXPECT_EQ(Trimmed(dir.path(), "torn", "{\"step\":1}\n{\"step\":2,\"lo", 1024, &tail), "{\"step\":1}\n{\"step\":3}\n");
  EXPECT_EQ(tail, "{\"step\":1}\n");
  EXPECT_EQ(Trimmed(dir.path(), "whole", "{\"step\":1}\n", 1024, &tail), "{\"step\":1}\n{\"step\":3}\n");
  EXPECT_EQ(tail, "{\"step\":1}\n");
  EXPECT_EQ(Trimmed(dir.path(), "one_torn", "{\"step\":1", 1024, &tail), "{\"step\":3}\n");
  EXPECT_EQ(tail, "");
  EXPECT_EQ(Trimmed(dir.path(), "empty", "", 1024, &tail), "{\"step\":3}\n");
}

TEST(MetricsWriterTrim, ReturnsOnlyTheTailAndEndsATornLineLongerThanIt) {
  ScopedTempDir dir("metrics_trim_long");
  std::string tail;
  // The tail is the last 12 bytes: "\n{\"step\":2}\n" holds one whole line.
  Trimmed(dir.path(), "tail", "{\"step\":1}\n{\"step\":2}\n", 12, &tail);
  EXPECT_EQ(tail, "\n{\"step\":2}\n");
  // No newline in the last 8 bytes: where the torn line starts is unknown, so it is
  // ended, not cut (a reader skips it as damaged).
  const std::string torn = "{\"step\":1}\n{\"step\":2,\"loss\":1.2345";
  EXPECT_EQ(Trimmed(dir.path(), "long", torn, 8, &tail), torn + "\n{\"step\":3}\n");
  EXPECT_EQ(tail, "");
}

}  // namespace
}  // namespace elastrain
