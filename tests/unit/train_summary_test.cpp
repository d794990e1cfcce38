#include <gtest/gtest.h>

#include "common/files.h"
#include "test_dirs.h"
#include "train/mfu_peak.h"
#include "train/run_summary.h"

namespace elastrain {

TEST(RunSummaryTest, WriteThenReadGivesTheSameSummary) {
  TrainSummary s;
  ScopedTempDir dir("run_summary");
  s.run_dir = dir.path();
  s.steps = 20;
  s.global_batch_size = 8;
  s.micro_batches_per_step = 2;
  s.first_loss = 5.5, s.final_loss = 4.25;
  s.first_eval_loss = 5.4, s.final_eval_loss = 4.3;
  s.tokens_per_sec = 1234.5;
  s.mfu = 0.125;
  s.wall_seconds = 3.5;
  s.world_size = 2;
  s.generation = 3;
  s.mesh = "data=2 fsdp=1 tensor=1";
  ASSERT_TRUE(WriteRunSummary(s).ok());
  auto r = ReadRunSummary(s.run_dir);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->steps, 20);
  EXPECT_EQ(r->micro_batches_per_step, 2);
  EXPECT_DOUBLE_EQ(r->final_loss, 4.25);
  EXPECT_DOUBLE_EQ(r->mfu, 0.125);
  EXPECT_EQ(r->world_size, 2);
  EXPECT_EQ(r->generation, 3);
  EXPECT_EQ(r->mesh, s.mesh);
}

TEST(RunSummaryTest, MissingFieldIsCorruptionNamingTheFile) {
  ScopedTempDir scratch("run_summary_bad");
  const std::string dir = scratch.path();
  ASSERT_TRUE(WriteFileAtomic(dir + "/summary.json", "{\"steps\": 3}\n").ok());
  auto r = ReadRunSummary(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(dir + "/summary.json"), std::string::npos) << r.status().message();
}

TEST(MfuPeakTest, GivenHardwarePeakNeedsNoProbe) {
  TrainConfig cfg;
  cfg.hardware_peak_tflops = 2;
  EXPECT_EQ(RankPeakFlopsForMfu(cfg), 0);  // would be > 0 had it measured
  EXPECT_DOUBLE_EQ(GenerationPeakFlops(cfg, 4, 0), 2e12);
  EXPECT_DOUBLE_EQ(GenerationPeakFlops(cfg, 4, 5e9), 2e12);
  EXPECT_STREQ(MfuPeakSource(cfg), "hardware_peak_tflops");
}

TEST(MfuPeakTest, MeasuredRankPeakScalesWithTheWorld) {
  TrainConfig cfg;
  cfg.hardware_peak_tflops = 0;
  EXPECT_DOUBLE_EQ(GenerationPeakFlops(cfg, 4, 5e9), 2e10);
  EXPECT_STREQ(MfuPeakSource(cfg), "measured SGEMM ceiling");
}

}  // namespace elastrain
