#include "model/layout.h"

#include <fmt/format.h>

#include "common/checked_math.h"

namespace elastrain {

namespace {
// Adds tensors one after another; the first size or offset that overflows is kept in
// `status` (the rest of the layout is then meaningless, and only the status is read).
struct Builder {
  ParamLayout* out;
  Status status;
  int64_t Add(std::string name, std::vector<int64_t> shape, ParamInit init) {
    ParamTensor t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    Result<int64_t> size = CheckedProduct(t.shape, t.name);
    Result<int64_t> total = size.ok() ? CheckedAdd(out->total, *size, "parameter count") : size;
    if (!total.ok()) {
      if (status.ok()) status = total.status();
      return out->total;
    }
    t.size = *size;
    t.offset = out->total;
    t.init = init;
    out->total = *total;
    out->tensors.push_back(std::move(t));
    return out->tensors.back().offset;
  }
};

int64_t Mul(int64_t a, int64_t b, const char* what, Status* st) {
  Result<int64_t> r = CheckedMul(a, b, what);
  if (!r.ok()) {
    if (st->ok()) *st = r.status();
    return 0;
  }
  return *r;
}
}  // namespace

ParamLayout BuildParamLayout(const ModelConfig& m) {
  Result<ParamLayout> p = BuildParamLayoutChecked(m);
  return p.ok() ? std::move(p).value() : ParamLayout{};
}

Result<ParamLayout> BuildParamLayoutChecked(const ModelConfig& m) {
  if (m.num_layers > kMaxLayers)  // before a loop of that many layers
    return Status::InvalidArgument(fmt::format("base_num_decoder_layers={}: expected an integer in [1, {}]",
                                               m.num_layers, kMaxLayers));
  ParamLayout p;
  Builder b{&p, Status::OK()};
  const int64_t V = m.vocab_size, C = m.emb_dim, F = m.mlp_dim;
  const int64_t QD = Mul(m.num_heads, m.head_dim, "base_num_query_heads*head_dim", &b.status);
  const int64_t KD = Mul(m.num_kv_heads, m.head_dim, "base_num_kv_heads*head_dim", &b.status);
  const bool gpt2 = m.family == ModelFamily::kGpt2;
  p.wte = b.Add("embed.wte", {V, C}, ParamInit::kNormal);
  if (gpt2) p.wpe = b.Add("embed.wpe", {m.max_seq_len, C}, ParamInit::kNormal);
  for (int64_t l = 0; l < m.num_layers; ++l) {
    LayerOffsets o;
    o.begin = p.total;
    auto n = [&](const char* s) { return fmt::format("layers.{}.{}", l, s); };
    if (m.pre_norm) o.attn_norm_w = b.Add(n("attn_norm.w"), {C}, ParamInit::kOnes);
    if (gpt2) o.attn_norm_b = b.Add(n("attn_norm.b"), {C}, ParamInit::kZeros);
    o.wq = b.Add(n("attn.wq"), {QD, C}, ParamInit::kNormal);
    o.wk = b.Add(n("attn.wk"), {KD, C}, ParamInit::kNormal);
    o.wv = b.Add(n("attn.wv"), {KD, C}, ParamInit::kNormal);
    if (gpt2 || m.attention_bias) {
      o.bq = b.Add(n("attn.bq"), {QD}, ParamInit::kZeros);
      o.bk = b.Add(n("attn.bk"), {KD}, ParamInit::kZeros);
      o.bv = b.Add(n("attn.bv"), {KD}, ParamInit::kZeros);
    }
    if (m.qk_norm && m.qk_norm_global) {  // split over tensor ranks with their heads
      o.q_norm = b.Add(n("attn.q_norm_all.w"), {QD}, ParamInit::kOnes);
      o.k_norm = b.Add(n("attn.k_norm_all.w"), {KD}, ParamInit::kOnes);
    } else if (m.qk_norm) {
      o.q_norm = b.Add(n("attn.q_norm.w"), {m.head_dim}, ParamInit::kOnes);
      o.k_norm = b.Add(n("attn.k_norm.w"), {m.head_dim}, ParamInit::kOnes);
    }
    o.wo = b.Add(n("attn.wo"), {C, QD}, ParamInit::kNormalResidual);
    if (gpt2) o.bo = b.Add(n("attn.bo"), {C}, ParamInit::kZeros);
    if (m.post_attn_norm) o.post_attn_norm = b.Add(n("post_attn_norm.w"), {C}, ParamInit::kOnes);
    if (m.pre_norm) o.mlp_norm_w = b.Add(n("mlp_norm.w"), {C}, ParamInit::kOnes);
    if (gpt2) o.mlp_norm_b = b.Add(n("mlp_norm.b"), {C}, ParamInit::kZeros);
    if (!gpt2) o.w_gate = b.Add(n("mlp.w_gate"), {F, C}, ParamInit::kNormal);
    o.w_up = b.Add(n("mlp.w_up"), {F, C}, ParamInit::kNormal);
    if (gpt2) o.b_up = b.Add(n("mlp.b_up"), {F}, ParamInit::kZeros);
    o.w_down = b.Add(n("mlp.w_down"), {C, F}, ParamInit::kNormalResidual);
    if (gpt2) o.b_down = b.Add(n("mlp.b_down"), {C}, ParamInit::kZeros);
    if (m.post_ffw_norm) o.post_ffw_norm = b.Add(n("post_ffw_norm.w"), {C}, ParamInit::kOnes);
    o.end = p.total;
    p.layers.push_back(o);
  }
  p.final_norm_w = b.Add("final_norm.w", {C}, ParamInit::kOnes);
  if (gpt2) p.final_norm_b = b.Add("final_norm.b", {C}, ParamInit::kZeros);
  p.lm_head = gpt2 || m.tie_embeddings ? p.wte : b.Add("lm_head.w", {V, C}, ParamInit::kNormal);
  ELASTRAIN_RETURN_IF_ERROR(b.status);
  return p;
}

const ParamTensor* ParamLayout::Find(const std::string& name) const {
  for (auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace elastrain
