// The worker's training loop on one process: fetch batch -> forward -> backward ->
// (accumulate) -> clip -> AdamW -> report. Later issues split the batch over ranks;
// the step already works in terms of the fixed global batch and a rank's share of it.
#pragma once

#include <cstdint>
#include <string>

#include <functional>

#include "comm/mesh.h"
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

// Where a rank stands among the workers of one generation.
struct WorkerContext {
  int rank = 0;
  int world = 1;                   // must equal cfg.num_workers
  std::string rendezvous_dir;      // the file store (world > 1)
  std::string prefix = "gen/0";    // key prefix of this generation's groups
  // Names lost peers when a collective fails, e.g. "rank 2 (pid 1234) is gone".
  std::function<std::string()> describe_lost_peers;
};

// Trains as configured, writing <base_output_directory>/<run_name>/ (config.yml,
// metrics.jsonl, train.log and summary.json from rank 0). Fails early, before
// allocating, when the model and its optimizer state cannot fit in this machine's
// memory. With world > 1 every rank calls this in its own process.
Result<TrainSummary> Train(const TrainConfig& cfg, const WorkerContext& ctx = {});

// The mesh of cfg.num_workers ranks from the ici_* keys (or the automatic rule with
// this machine's memory shared among the workers).
Result<Mesh> ResolveMeshForConfig(const TrainConfig& cfg);

// The global batch: global_batch_size, or (MaxText's rule) per_device_batch_size *
// workers * gradient_accumulation_steps when it is 0. It splits over data x fsdp;
// tensor peers share their rows.
int64_t GlobalBatchSize(const TrainConfig& cfg, int64_t workers);

}  // namespace elastrain
