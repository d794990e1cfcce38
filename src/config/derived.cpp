#include "config/derived.h"

#include "model/flops.h"

namespace elastrain {

Result<Mesh> ResolveMeshForConfig(const TrainConfig& c, int64_t workers) {
  AutoMeshBudget budget;
  budget.memory_bytes_per_worker = AvailableMemoryBytes() / workers;
  budget.batch_rows = c.per_device_batch_size;
  budget.seq_len = c.max_target_length;
  budget.remat_full = c.remat_policy == RematPolicy::kFull;
  return ResolveMesh(static_cast<int>(workers), c.ici_data_parallelism, c.ici_fsdp_parallelism,
                     c.ici_tensor_parallelism, c.model, budget);
}

int64_t GlobalBatchSize(const TrainConfig& cfg) {
  if (cfg.global_batch_size > 0) return cfg.global_batch_size;
  return cfg.per_device_batch_size * cfg.max_workers * cfg.gradient_accumulation_steps;
}

DatasetOptions DatasetOptionsForConfig(const TrainConfig& cfg) {
  DatasetOptions o;
  o.type = cfg.dataset_type;
  o.path = cfg.dataset_path;
  o.tokenizer_path = cfg.tokenizer_path;
  o.cache_dir = cfg.base_output_directory + "/.cache";
  o.seq_len = cfg.max_target_length;
  o.vocab_size = cfg.model.vocab_size;
  o.eval_split_fraction = cfg.eval_split_fraction;
  o.seed = static_cast<uint64_t>(cfg.data_shuffle_seed);
  return o;
}

}  // namespace elastrain
