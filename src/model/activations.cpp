#include "model/activations.h"

namespace elastrain {

ActivationDims MakeActivationDims(const ModelConfig& m, int64_t B, int64_t T) {
  ActivationDims d;
  d.B = B;
  d.T = T;
  d.N = B * T;
  d.C = m.emb_dim;
  d.QD = m.num_heads * m.head_dim;
  d.S = (m.num_heads + 2 * m.num_kv_heads) * m.head_dim;
  d.F = m.mlp_dim;
  d.U = m.family == ModelFamily::kLlama ? 2 * m.mlp_dim : m.mlp_dim;
  d.Hq = m.num_heads;
  d.V = m.vocab_size;
  return d;
}

int64_t ActivationFloats(const ModelConfig& cfg, int64_t batch, int64_t seq_len, RematPolicy remat) {
  ModelActivations<float> counted;
  return CarveActivations<float>(nullptr, MakeActivationDims(cfg, batch, seq_len), cfg.num_layers, remat, &counted);
}

}  // namespace elastrain
