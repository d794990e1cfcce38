#include "model/model_config.h"

#include <fmt/format.h>

#include "model/layout.h"

namespace elastrain {

const char* FamilyName(ModelFamily f) { return ChoiceWord(kModelFamilyChoices, f).data(); }

namespace {
// The model-defining settings the transformer does not implement (yet) for the family:
// refused by their MaxText key and value, never trained as something else.
Status CheckImplemented(const ModelConfig& m) {
  const bool llama = m.family == ModelFamily::kLlama;
  auto refuse = [&](const std::string& what, const std::string& supported) {
    return Status::InvalidArgument(fmt::format("{}: not implemented for the {} family (elastrain supports {})", what,
                                               FamilyName(m.family), supported));
  };
  if (llama && m.mlp_activation == MlpActivation::kGelu)
    return refuse("mlp_activations=[gelu]", "[silu, linear] and [gelu, linear]");
  if (!llama && m.mlp_activation != MlpActivation::kGelu)
    return refuse(m.mlp_activation == MlpActivation::kSwiGlu ? "mlp_activations=[silu, linear]"
                                                             : "mlp_activations=[gelu, linear]",
                  "[gelu]");
  if (!llama && !m.tie_embeddings) return refuse("logits_via_embedding=false", "true: gpt2/gpt3 tie the output head");
  // MaxText applies final_logits_soft_cap only to tied logits (logits_via_embedding).
  if (m.final_logits_soft_cap < 0 || (m.final_logits_soft_cap != 0.0 && !m.tie_embeddings))
    return Status::InvalidArgument(fmt::format(
        "final_logits_soft_cap={} with logits_via_embedding={}: MaxText caps only the logits of the tied "
        "embedding; expected 0.0, or logits_via_embedding=true and a positive cap",
        m.final_logits_soft_cap, m.tie_embeddings));
  if (m.attn_logits_soft_cap < 0)
    return Status::InvalidArgument(
        fmt::format("attn_logits_soft_cap={}: expected 0.0 (none) or a positive cap", m.attn_logits_soft_cap));
  if (m.z_loss < 0)
    return Status::InvalidArgument(fmt::format("z_loss_multiplier={}: expected a non-negative number", m.z_loss));
  if (!(m.embedding_scale > 0)) return Status::InvalidArgument(fmt::format("embedding scale {}: expected > 0", m.embedding_scale));
  if (m.sliding_window < 0)
    return Status::InvalidArgument(fmt::format("sliding_window_size={}: expected 0 (none) or a positive window", m.sliding_window));
  if (m.attention_layout != AttentionLayout::kGlobal && m.sliding_window == 0)
    return Status::InvalidArgument("sliding_window_size=0 with local attention layers: expected a positive window");
  if (m.attention_layout == AttentionLayout::kGlobal && m.sliding_window != 0)
    return refuse(fmt::format("sliding_window_size={} with every layer global", m.sliding_window),
                  "a window with decoder_block=mistral (every layer local) or gemma2 (alternating)");
  if (m.rope_scaling == RopeScaling::kYarn) return refuse("rope_type=yarn", "rope_type default and llama3.1");
  if (m.qk_norm_global && !m.qk_norm)
    return Status::InvalidArgument("a QK norm over all heads (olmo3) without use_qk_norm=true: expected use_qk_norm=true");
  if (!m.pre_norm && !(m.post_attn_norm && m.post_ffw_norm))
    return refuse("layers without pre-norms and without both post norms",
                  "pre-norms, or none with use_post_attn_norm and use_post_ffw_norm (olmo3)");
  if (llama) return Status::OK();
  // The gpt2 family (gpt2, MaxText's gpt3): its fixed form, plus z_loss and the output
  // soft cap, which do not depend on the block.
  if (m.embedding_scale != 1.0) return refuse(fmt::format("embedding scale {}", m.embedding_scale), "1");
  if (m.rope_scaling != RopeScaling::kNone) return refuse("rope_type=llama3.1", "learned positions, no RoPE");
  if (m.qk_norm) return refuse("use_qk_norm=true", "false");
  if (m.sliding_window != 0) return refuse(fmt::format("sliding_window_size={}", m.sliding_window), "0: global attention");
  if (m.attn_logits_soft_cap != 0.0) return refuse(fmt::format("attn_logits_soft_cap={}", m.attn_logits_soft_cap), "0.0");
  if (m.post_attn_norm) return refuse("use_post_attn_norm=true", "false");
  if (m.post_ffw_norm) return refuse("use_post_ffw_norm=true", "false");
  if (!m.pre_norm) return refuse("layers without pre-norms (olmo3)", "pre-norm layers");
  return Status::OK();
}
}  // namespace

Status ModelConfig::Validate() const {
  auto positive = [](const char* key, int64_t v, int64_t max) -> Status {
    if (v <= 0) return Status::InvalidArgument(fmt::format("{}={}: expected a positive integer", key, v));
    if (v > max)
      return Status::InvalidArgument(fmt::format("{}={}: expected an integer in [1, {}] (configs/base.yml)", key, v, max));
    return Status::OK();
  };
  ELASTRAIN_RETURN_IF_ERROR(positive("vocab_size", vocab_size, kMaxVocabSize));
  ELASTRAIN_RETURN_IF_ERROR(positive("base_emb_dim", emb_dim, kMaxEmbDim));
  ELASTRAIN_RETURN_IF_ERROR(positive("base_num_decoder_layers", num_layers, kMaxLayers));
  ELASTRAIN_RETURN_IF_ERROR(positive("base_num_query_heads", num_heads, kMaxHeads));
  ELASTRAIN_RETURN_IF_ERROR(positive("base_num_kv_heads", num_kv_heads, kMaxHeads));
  ELASTRAIN_RETURN_IF_ERROR(positive("head_dim", head_dim, kMaxHeadDim));
  ELASTRAIN_RETURN_IF_ERROR(positive("base_mlp_dim", mlp_dim, kMaxMlpDim));
  ELASTRAIN_RETURN_IF_ERROR(positive("max_target_length", max_seq_len, kMaxSeqLen));
  if (num_heads % num_kv_heads != 0)
    return Status::InvalidArgument(fmt::format(
        "base_num_query_heads={} is not divisible by base_num_kv_heads={}: grouped-query attention "
        "shares each kv head among an equal number of query heads",
        num_heads, num_kv_heads));
  if (family == ModelFamily::kGpt2) {
    if (num_kv_heads != num_heads)
      return Status::InvalidArgument(fmt::format(
          "base_num_kv_heads={}: the gpt2 family uses multi-head attention, expected base_num_query_heads={}",
          num_kv_heads, num_heads));
    if (num_heads * head_dim != emb_dim)
      return Status::InvalidArgument(fmt::format(
          "head_dim={}: the gpt2 family needs base_num_query_heads*head_dim == base_emb_dim ({}*{} != {}); "
          "head_dim must divide base_emb_dim",
          head_dim, num_heads, head_dim, emb_dim));
  }
  ELASTRAIN_RETURN_IF_ERROR(CheckImplemented(*this));
  if (family == ModelFamily::kLlama && head_dim % 2 != 0)
    return Status::InvalidArgument(fmt::format("head_dim={}: RoPE rotates pairs, expected an even head_dim", head_dim));
  ELASTRAIN_ASSIGN_OR_RETURN(const ParamLayout layout, BuildParamLayoutChecked(*this));
  if (layout.total > kMaxModelParams)
    return Status::InvalidArgument(fmt::format(
        "the model has {} parameters, more than the {} supported (16 bytes each for parameters, gradients and "
        "AdamW state); reduce vocab_size, base_emb_dim, base_mlp_dim or base_num_decoder_layers",
        layout.total, kMaxModelParams));
  return Status::OK();
}

int64_t ModelConfig::NumParams() const { return BuildParamLayout(*this).total; }

namespace {
ModelConfig Make(std::string name, ModelFamily fam, int64_t V, int64_t C, int64_t L, int64_t H, int64_t Hkv,
                 int64_t hd, int64_t F, int64_t T, double theta = 10000.0) {
  ModelConfig m;
  m.name = std::move(name);
  m.family = fam;
  m.vocab_size = V;
  m.emb_dim = C;
  m.num_layers = L;
  m.num_heads = H;
  m.num_kv_heads = Hkv;
  m.head_dim = hd;
  m.mlp_dim = F;
  m.max_seq_len = T;
  m.rope_theta = theta;
  m.norm_eps = 1e-5;
  m.mlp_activation = fam == ModelFamily::kGpt2 ? MlpActivation::kGelu : MlpActivation::kSwiGlu;
  m.tie_embeddings = fam == ModelFamily::kGpt2;
  return m;
}

// The small presets of the decoder families MaxText ships (tests/integration/
// test_family_reference.sh checks each against an independent PyTorch model). Their
// soft caps are far smaller than the real models' (30, 50) so that the caps bend the
// logits of a freshly initialised tiny model and a wrong cap cannot pass the check.
// Gemma has no embedding scale here, as in MaxText: MaxText stores Gemma's embedding
// already multiplied by sqrt(emb_dim) (its checkpoint conversion does that) and divides
// the tied logits by sqrt(emb_dim) (normalize_embedding_logits), which is the published
// model (embeddings times sqrt(emb_dim), logits by the unscaled table) in that storage.
std::vector<ModelConfig> FamilyPresets() {
  using F = ModelFamily;
  std::vector<ModelConfig> out;
  auto add = [&](ModelConfig m, auto&& set) {
    set(m);
    out.push_back(std::move(m));
  };
  //                    V    C  L  Hq Hkv hd  F    T
  add(Make("tiny-llama31", F::kLlama, 256, 64, 2, 4, 2, 16, 128, 64, 500000.0),
      [](ModelConfig& m) { m.rope_scaling = RopeScaling::kLlama31; });
  add(Make("tiny-mistral", F::kLlama, 256, 64, 2, 4, 2, 16, 128, 64, 1000000.0), [](ModelConfig& m) {
    m.sliding_window = 5;
    m.attention_layout = AttentionLayout::kAllLocal;
  });
  add(Make("tiny-qwen2", F::kLlama, 256, 64, 2, 4, 2, 16, 128, 64, 1000000.0), [](ModelConfig& m) {
    m.attention_bias = true;
    m.norm_eps = 1e-6;
  });
  add(Make("tiny-qwen3", F::kLlama, 256, 64, 2, 4, 2, 16, 128, 64, 1000000.0), [](ModelConfig& m) {
    m.qk_norm = true;
    m.tie_embeddings = true;
    m.norm_eps = 1e-6;
  });
  add(Make("tiny-gemma", F::kLlama, 256, 64, 2, 4, 2, 16, 128, 64), [](ModelConfig& m) {
    m.mlp_activation = MlpActivation::kGeGlu;
    m.tie_embeddings = true;
    m.normalize_embedding_logits = true;
    m.norm_eps = 1e-6;
  });
  add(Make("tiny-gemma2", F::kLlama, 256, 64, 4, 4, 2, 16, 128, 64), [](ModelConfig& m) {
    m.mlp_activation = MlpActivation::kGeGlu;
    m.tie_embeddings = true;
    m.normalize_embedding_logits = true;
    m.norm_eps = 1e-6;
    m.sliding_window = 5;
    m.attention_layout = AttentionLayout::kAlternating;
    m.attn_logits_soft_cap = 0.05;
    m.final_logits_soft_cap = 0.05;
    m.post_attn_norm = true;
    m.post_ffw_norm = true;
  });
  add(Make("tiny-zloss", F::kLlama, 256, 64, 2, 4, 2, 16, 128, 64), [](ModelConfig& m) { m.z_loss = 0.01; });
  // olmo3 (olmo3-7b-pt: default RoPE; YaRN is not implemented): norms only after
  // attention and the MLP, one QK norm over all heads, 3 local layers then 1 global.
  add(Make("tiny-olmo3", F::kLlama, 256, 64, 4, 4, 2, 16, 128, 64, 500000.0), [](ModelConfig& m) {
    m.norm_eps = 1e-6;
    m.pre_norm = false;
    m.post_attn_norm = true;
    m.post_ffw_norm = true;
    m.qk_norm = true;
    m.qk_norm_global = true;
    m.sliding_window = 5;
    m.attention_layout = AttentionLayout::kOlmo3;
  });
  // gpt3: the gpt2 family with the position table of trainable_position_size (here 64).
  add(Make("tiny-gpt3", F::kGpt2, 256, 64, 2, 4, 4, 16, 256, 64), [](ModelConfig&) {});
  return out;
}

std::vector<ModelConfig> Presets() {
  using F = ModelFamily;
  std::vector<ModelConfig> families = FamilyPresets();
  std::vector<ModelConfig> out = {
      // name          family    V       C     L   Hq  Hkv  hd   F      T
      Make("tiny", F::kLlama, 256, 64, 2, 8, 4, 8, 128, 128),
      Make("tiny-gpt2", F::kGpt2, 256, 64, 2, 8, 8, 8, 256, 128),
      Make("small", F::kLlama, 4096, 384, 6, 6, 2, 64, 1024, 256),
      Make("gpt2-124m", F::kGpt2, 50257, 768, 12, 12, 12, 64, 3072, 1024),
      Make("llama2-7b", F::kLlama, 32000, 4096, 32, 32, 32, 128, 11008, 4096),
      Make("llama3-8b", F::kLlama, 128256, 4096, 32, 32, 8, 128, 14336, 8192, 500000.0),
      // MaxText's configs/models/<name>.yml of the shapes elastrain trains (T: the
      // model's context for llama, trainable_position_size for gpt3).
      Make("llama2-13b", F::kLlama, 32000, 5120, 40, 40, 40, 128, 13824, 4096),
      Make("llama2-70b", F::kLlama, 32000, 8192, 80, 64, 8, 128, 28672, 4096),
      Make("llama3-70b", F::kLlama, 128256, 8192, 80, 64, 8, 128, 28672, 8192, 500000.0),
      Make("gpt3-52k", F::kGpt2, 1024, 16, 1, 2, 2, 8, 64, 2048),
      Make("gpt3-6b", F::kGpt2, 32768, 3072, 48, 12, 12, 256, 12288, 16384),
      Make("gpt3-22b", F::kGpt2, 32768, 6144, 48, 24, 24, 256, 24576, 16384),
      Make("gpt3-175b", F::kGpt2, 50304, 12288, 96, 96, 96, 128, 49152, 16384),
  };
  out.insert(out.end(), families.begin(), families.end());
  return out;
}
}  // namespace

Result<ModelConfig> ModelPreset(const std::string& name) {
  for (auto& m : Presets())
    if (m.name == name) return m;
  std::string names;
  for (auto& n : ModelPresetNames()) names += (names.empty() ? "" : ", ") + n;
  return Status::InvalidArgument(fmt::format("model_name={}: unknown model; expected one of default, {}", name, names));
}

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> out;
  for (auto& m : Presets()) out.push_back(m.name);
  return out;
}

}  // namespace elastrain
