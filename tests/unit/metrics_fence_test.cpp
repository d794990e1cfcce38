// MetricsWriter's fence (docs/elastic.md, "Partitions and fencing"): lines held in order
// while the store cannot confirm the generation, written once it can, and never again
// once a newer generation owns the file.
#include <gtest/gtest.h>

#include <string>

#include "common/files.h"
#include "common/metrics.h"
#include "test_dirs.h"

namespace elastrain {
namespace {

TEST(MetricsFence, HoldsLinesWhileUnconfirmedThenWritesThemInOrder) {
  ScopedTempDir dir("metrics_fence");
  const std::string path = dir.path() + "/metrics.jsonl";
  MetricsWriter w;
  ASSERT_TRUE(w.Open(path).ok());
  Status verdict = Status::OK();
  w.set_fence([&] { return verdict; });
  ASSERT_TRUE(w.Write({{"step", 1}}).ok());
  verdict = Status::Unavailable("etcd cannot be reached");
  ASSERT_TRUE(w.Write({{"step", 2}}).ok()) << "an unreachable store holds the line, it is no error";
  ASSERT_TRUE(w.Write({{"step", 3}}).ok());
  EXPECT_EQ(w.held_lines(), 2u);
  EXPECT_EQ(ReadFile(path).value(), "{\"step\":1}\n");
  verdict = Status::OK();
  ASSERT_TRUE(w.Write({{"step", 4}}).ok());
  EXPECT_EQ(w.held_lines(), 0u);
  EXPECT_EQ(ReadFile(path).value(), "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n{\"step\":4}\n");
}

TEST(MetricsFence, AStaleGenerationWritesNothingMore) {
  ScopedTempDir dir("metrics_fence_stale");
  const std::string path = dir.path() + "/metrics.jsonl";
  MetricsWriter w;
  ASSERT_TRUE(w.Open(path).ok());
  Status verdict = Status::Unavailable("cut off");
  w.set_fence([&] { return verdict; });
  ASSERT_TRUE(w.Write({{"step", 7}}).ok());  // held
  verdict = Status::FailedPrecondition("generation 3 is no longer current: the job is at generation 4");
  Status st = w.Write({{"step", 8}});
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("generation 4"), std::string::npos) << st.message();
  verdict = Status::OK();  // even a later OK cannot bring a fenced-out writer back
  EXPECT_EQ(w.Write({{"step", 9}}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadFile(path).value(), "") << "neither the held line nor any later one";
  EXPECT_EQ(w.held_lines(), 0u);
}

TEST(MetricsFence, HoldsAtMostTheLimitDroppingTheOldest) {
  ScopedTempDir dir("metrics_fence_cap");
  const std::string path = dir.path() + "/metrics.jsonl";
  MetricsWriter w;
  ASSERT_TRUE(w.Open(path).ok());
  bool reachable = false;
  w.set_fence([&] { return reachable ? Status::OK() : Status::DeadlineExceeded("no answer"); });
  for (size_t i = 0; i < MetricsWriter::kMaxHeldLines + 5; ++i) ASSERT_TRUE(w.Write({{"step", i}}).ok());
  EXPECT_EQ(w.held_lines(), MetricsWriter::kMaxHeldLines);
  reachable = true;
  ASSERT_TRUE(w.Write({{"step", -1}}).ok());
  const std::string text = ReadFile(path).value();
  EXPECT_EQ(text.rfind("{\"step\":5}\n", 0), 0u) << "the five oldest were dropped";
}

}  // namespace
}  // namespace elastrain
