#include "model/layout.h"

#include <fmt/format.h>

namespace elastrain {

namespace {
struct Builder {
  ParamLayout* out;
  int64_t Add(std::string name, std::vector<int64_t> shape, ParamInit init) {
    ParamTensor t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.size = 1;
    for (int64_t d : t.shape) t.size *= d;
    t.offset = out->total;
    t.init = init;
    out->total += t.size;
    out->tensors.push_back(std::move(t));
    return out->tensors.back().offset;
  }
};
}  // namespace

ParamLayout BuildParamLayout(const ModelConfig& m) {
  ParamLayout p;
  Builder b{&p};
  const int64_t V = m.vocab_size, C = m.emb_dim, F = m.mlp_dim;
  const int64_t QD = m.num_heads * m.head_dim, KD = m.num_kv_heads * m.head_dim;
  const bool gpt2 = m.family == ModelFamily::kGpt2;
  p.wte = b.Add("embed.wte", {V, C}, ParamInit::kNormal);
  if (gpt2) p.wpe = b.Add("embed.wpe", {m.max_seq_len, C}, ParamInit::kNormal);
  for (int64_t l = 0; l < m.num_layers; ++l) {
    LayerOffsets o;
    o.begin = p.total;
    auto n = [&](const char* s) { return fmt::format("layers.{}.{}", l, s); };
    o.attn_norm_w = b.Add(n("attn_norm.w"), {C}, ParamInit::kOnes);
    if (gpt2) o.attn_norm_b = b.Add(n("attn_norm.b"), {C}, ParamInit::kZeros);
    o.wq = b.Add(n("attn.wq"), {QD, C}, ParamInit::kNormal);
    o.wk = b.Add(n("attn.wk"), {KD, C}, ParamInit::kNormal);
    o.wv = b.Add(n("attn.wv"), {KD, C}, ParamInit::kNormal);
    if (gpt2) {
      o.bq = b.Add(n("attn.bq"), {QD}, ParamInit::kZeros);
      o.bk = b.Add(n("attn.bk"), {KD}, ParamInit::kZeros);
      o.bv = b.Add(n("attn.bv"), {KD}, ParamInit::kZeros);
    }
    o.wo = b.Add(n("attn.wo"), {C, QD}, ParamInit::kNormalResidual);
    if (gpt2) o.bo = b.Add(n("attn.bo"), {C}, ParamInit::kZeros);
    o.mlp_norm_w = b.Add(n("mlp_norm.w"), {C}, ParamInit::kOnes);
    if (gpt2) o.mlp_norm_b = b.Add(n("mlp_norm.b"), {C}, ParamInit::kZeros);
    if (!gpt2) o.w_gate = b.Add(n("mlp.w_gate"), {F, C}, ParamInit::kNormal);
    o.w_up = b.Add(n("mlp.w_up"), {F, C}, ParamInit::kNormal);
    if (gpt2) o.b_up = b.Add(n("mlp.b_up"), {F}, ParamInit::kZeros);
    o.w_down = b.Add(n("mlp.w_down"), {C, F}, ParamInit::kNormalResidual);
    if (gpt2) o.b_down = b.Add(n("mlp.b_down"), {C}, ParamInit::kZeros);
    o.end = p.total;
    p.layers.push_back(o);
  }
  p.final_norm_w = b.Add("final_norm.w", {C}, ParamInit::kOnes);
  if (gpt2) p.final_norm_b = b.Add("final_norm.b", {C}, ParamInit::kZeros);
  p.lm_head = gpt2 ? p.wte : b.Add("lm_head.w", {V, C}, ParamInit::kNormal);
  return p;
}

const ParamTensor* ParamLayout::Find(const std::string& name) const {
  for (auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace elastrain
