// The run summary: what a completed run reports, and <run>/summary.json, its one
// serialised form (written by the chief at the end of training, read by `elastrain
// train` when the elastic path ran the job in other processes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace elastrain {

struct TrainSummary {
  std::string run_dir;
  int64_t steps = 0;       // the run's last step
  int64_t start_step = 0;  // the step this invocation resumed at (0: from scratch)
  int64_t global_batch_size = 0;
  int64_t micro_batches_per_step = 0;
  double first_loss = 0, final_loss = 0;
  double first_eval_loss = 0, final_eval_loss = 0;
  double tokens_per_sec = 0;   // over all steps after the first
  double mfu = 0;              // model FLOP/s over the peak (see model/flops.h)
  double wall_seconds = 0;
  size_t activation_bytes = 0;   // not in summary.json
  // The generation that finished the run.
  int64_t world_size = 0;
  int64_t generation = 0;
  std::string mesh;              // Mesh::ToString()
};

// Writes <s.run_dir>/summary.json atomically.
Status WriteRunSummary(const TrainSummary& s);
// Reads <run_dir>/summary.json; Corruption naming the file when a field is missing.
Result<TrainSummary> ReadRunSummary(const std::string& run_dir);

}  // namespace elastrain
