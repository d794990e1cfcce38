#include "model/flops.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "model/layout.h"
#include "model/activations.h"

namespace elastrain {

int64_t MatmulParams(const ModelConfig& m) {
  const ParamLayout lay = BuildParamLayout(m);
  int64_t n = 0;
  for (const ParamTensor& t : lay.tensors)
    if (t.shape.size() == 2 && t.name.rfind("embed.", 0) != 0) n += t.size;
  if (m.family == ModelFamily::kGpt2 || m.tie_embeddings) n += m.vocab_size * m.emb_dim;  // the tied head is a GEMM
  return n;
}

double TrainingFlopsPerToken(const ModelConfig& m, int64_t seq_len) {
  return 6.0 * static_cast<double>(MatmulParams(m)) +
         12.0 * static_cast<double>(m.num_layers * seq_len * m.num_heads * m.head_dim);
}

MemoryEstimate EstimateTrainingMemory(const ModelConfig& m, int64_t batch, int64_t seq_len, bool remat_full) {
  MemoryEstimate e;
  const int64_t n = m.NumParams();
  e.param_bytes = 4 * n;
  e.grad_bytes = 4 * n;
  e.optimizer_bytes = 8 * n;
  e.activation_bytes = 4 * ActivationFloats(
                               m, batch, seq_len, remat_full ? RematPolicy::kFull : RematPolicy::kNone);
  return e;
}

int64_t AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
}

}  // namespace elastrain
