#include "plan/mesh_for_config.h"

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

}  // namespace elastrain
