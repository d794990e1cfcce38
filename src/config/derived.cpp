#include "config/derived.h"

namespace elastrain {

int64_t GlobalBatchSize(const TrainConfig& cfg) {
  if (cfg.global_batch_size > 0) return cfg.global_batch_size;
  return cfg.per_device_batch_size * cfg.max_workers * cfg.gradient_accumulation_steps;
}

}  // namespace elastrain
