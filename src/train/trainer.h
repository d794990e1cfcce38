// The worker's training loop on one process: fetch batch -> forward -> backward ->
// (accumulate) -> clip -> AdamW -> report. Later issues split the batch over ranks;
// the step already works in terms of the fixed global batch and a rank's share of it.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "config/config.h"

namespace elastrain {

struct TrainSummary {
  std::string run_dir;
  int64_t steps = 0;
  int64_t global_batch_size = 0;
  int64_t micro_batches_per_step = 0;
  double first_loss = 0, final_loss = 0;
  double first_eval_loss = 0, final_eval_loss = 0;
  double tokens_per_sec = 0;   // over all steps after the first
  double mfu = 0;              // model FLOP/s over the peak (see model/flops.h)
  double wall_seconds = 0;
  size_t activation_bytes = 0;
};

// Trains as configured, writing <base_output_directory>/<run_name>/ (config.yml,
// metrics.jsonl, train.log). Fails early, before allocating, when the model and its
// optimizer state cannot fit in this machine's memory.
Result<TrainSummary> Train(const TrainConfig& cfg);

// The global batch: global_batch_size, or per_device_batch_size * workers *
// gradient_accumulation_steps when it is 0.
int64_t GlobalBatchSize(const TrainConfig& cfg, int64_t workers);

}  // namespace elastrain
