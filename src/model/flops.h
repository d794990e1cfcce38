// FLOP and memory estimates of training a model, used for MFU, planning and the early
// out-of-memory check. Conventions (PaLM, appendix B; MaxText's calculate_tflops):
//   matmul FLOPs per token = 6 * N_matmul   (forward 2, backward 4, per weight)
//   attention FLOPs per token = 12 * L * T * Hq * hd   (QK^T and PV, fwd + bwd, no causal halving)
// where N_matmul counts every weight used in a GEMM (attention, MLP and the output
// head) and excludes lookups (token and position embeddings, unless tied to the head).
#pragma once

#include <cstdint>

#include "model/model_config.h"

namespace elastrain {

int64_t MatmulParams(const ModelConfig& m);
// Training FLOPs (forward + backward) per token at sequence length T.
double TrainingFlopsPerToken(const ModelConfig& m, int64_t seq_len);

struct MemoryEstimate {
  int64_t param_bytes = 0;       // fp32 parameters
  int64_t grad_bytes = 0;        // fp32 gradients
  int64_t optimizer_bytes = 0;   // AdamW m and v
  int64_t activation_bytes = 0;  // one micro-batch of `batch` rows
  int64_t total() const { return param_bytes + grad_bytes + optimizer_bytes + activation_bytes; }
};
MemoryEstimate EstimateTrainingMemory(const ModelConfig& m, int64_t batch, int64_t seq_len, bool remat_full);

// Bytes of memory this machine has available now (MemAvailable), or physical memory.
int64_t AvailableMemoryBytes();

}  // namespace elastrain
