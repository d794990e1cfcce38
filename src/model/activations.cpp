#include "model/activations.h"

#include <fmt/format.h>

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
  d.QKH = m.qk_norm ? m.num_heads + m.num_kv_heads : 0;
  d.hd = m.head_dim;
  d.post_attn = m.post_attn_norm;
  d.post_ffw = m.post_ffw_norm;
  d.pre_norm = m.pre_norm;
  return d;
}

Result<int64_t> CheckedActivationFloats(const ModelConfig& cfg, int64_t batch, int64_t seq_len, RematPolicy remat) {
  int64_t n = 0, qd = 0, s = 0, heads = 0;
  bool over = batch < 0 || seq_len < 0 || __builtin_mul_overflow(batch, seq_len, &n) ||
              __builtin_mul_overflow(cfg.num_heads, cfg.head_dim, &qd) ||
              __builtin_add_overflow(cfg.num_heads, 2 * cfg.num_kv_heads, &heads) ||
              __builtin_mul_overflow(heads, cfg.head_dim, &s) || cfg.num_layers > kMaxLayers;
  int64_t floats = 0;
  if (!over) {
    ModelActivations<float> counted;
    floats = CarveActivations<float>(nullptr, MakeActivationDims(cfg, batch, seq_len), cfg.num_layers, remat, &counted,
                                     &over);
  }
  // 2^60 floats (4 EiB): room left to add the parameters' bytes and multiply by a few.
  if (over || floats > kMaxActivationFloats)
    return Status::InvalidArgument(fmt::format(
        "activation memory of a micro-batch of {} rows x {} tokens (per_device_batch_size x max_target_length) "
        "exceeds 2^60 floats (or overflows 64 bits); reduce them or the model",
        batch, seq_len));
  return floats;
}

int64_t ActivationFloats(const ModelConfig& cfg, int64_t batch, int64_t seq_len, RematPolicy remat) {
  ModelActivations<float> counted;
  return CarveActivations<float>(nullptr, MakeActivationDims(cfg, batch, seq_len), cfg.num_layers, remat, &counted);
}

}  // namespace elastrain
