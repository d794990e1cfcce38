#include "convert/hf_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <nlohmann/json.hpp>

#include "config/model_keys.h"

namespace elastrain::convert {
namespace {

using json = nlohmann::json;

// What a config.json names, as elastrain's decoder block.
struct Architecture {
  const char* hf_class;
  const char* model_type;
  DecoderBlock block;
};
constexpr Architecture kArchitectures[] = {
    {"GPT2LMHeadModel", "gpt2", DecoderBlock::kGpt2},
    {"LlamaForCausalLM", "llama", DecoderBlock::kLlama},
    {"MistralForCausalLM", "mistral", DecoderBlock::kMistral},
    {"Qwen2ForCausalLM", "qwen2", DecoderBlock::kQwen2},
    {"Qwen3ForCausalLM", "qwen3", DecoderBlock::kQwen3},
};
constexpr const char* kImportable =
    "GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM";
// The largest integer a config.json field may hold here: every shape key's own range is
// checked when the model keys load (model/model_config.h); this only keeps the numbers
// exact in a double and in int64.
constexpr int64_t kMaxField = int64_t{1} << 40;
// max_target_length of an imported model: its context, at most this (the activations
// of a 128K-token window do not fit a CPU); any value up to the context may be given.
constexpr int64_t kDefaultTargetLength = 2048;

// Reads the fields of one config.json; every error names the file and the field.
class Fields {
 public:
  Fields(const json& j, std::string origin) : j_(j), origin_(std::move(origin)) {}

  Status Bad(const std::string& key, const std::string& what) const {
    return Status::InvalidArgument(fmt::format("{}: {}: {}", origin_, key, what));
  }
  bool Has(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }

  Result<int64_t> Int(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
    if (!Has(key)) {
      if (fallback) return *fallback;
      return Bad(key, "missing (expected a positive integer)");
    }
    const json& v = j_[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxField)
      return Bad(key, fmt::format("{}: expected an integer in [1, 2^40]", v.dump()));
    return v.get<int64_t>();
  }
  Result<double> Number(const std::string& key, double fallback) const {
    if (!Has(key)) return fallback;
    const json& v = j_[key];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
      return Bad(key, fmt::format("{}: expected a positive number", v.dump()));
    return v.get<double>();
  }
  Result<bool> Bool(const std::string& key, bool fallback) const {
    if (!Has(key)) return fallback;
    if (!j_[key].is_boolean()) return Bad(key, fmt::format("{}: expected true or false", j_[key].dump()));
    return j_[key].get<bool>();
  }
  Result<std::string> String(const std::string& key, const std::string& fallback) const {
    if (!Has(key)) return fallback;
    if (!j_[key].is_string()) return Bad(key, fmt::format("{}: expected a string", j_[key].dump()));
    return j_[key].get<std::string>();
  }
  // A field that must hold `want` (or be absent) for elastrain to train the same model.
  Status Require(const std::string& key, const json& want, const std::string& why) const {
    if (!Has(key) || j_[key] == want) return Status::OK();
    return Bad(key, fmt::format("{} is not implemented ({}; expected {})", j_[key].dump(), why, want.dump()));
  }
  const json& Raw(const std::string& key) const { return j_[key]; }

 private:
  const json& j_;
  std::string origin_;
};

Result<const Architecture*> FindArchitecture(const json& j, const std::string& origin) {
  std::string cls, type;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    cls = j["architectures"][0].get<std::string>();
  if (j.contains("model_type") && j["model_type"].is_string()) type = j["model_type"].get<std::string>();
  for (const Architecture& a : kArchitectures)
    if (cls == a.hf_class || (cls.empty() && type == a.model_type)) return &a;
  return Status::InvalidArgument(
      fmt::format("{}: architectures [{}] (model_type '{}') cannot be imported: elastrain imports {}", origin,
                  cls.empty() ? "none" : cls, type, kImportable));
}

Result<ModelConfig> Gpt2FromFields(const Fields& f) {
  ModelConfig m;
  m.family = ModelFamily::kGpt2;
  ELASTRAIN_ASSIGN_OR_RETURN(m.emb_dim, f.Int("n_embd"));
  ELASTRAIN_ASSIGN_OR_RETURN(m.num_heads, f.Int("n_head"));
  ELASTRAIN_ASSIGN_OR_RETURN(m.num_layers, f.Int("n_layer"));
  ELASTRAIN_ASSIGN_OR_RETURN(m.max_seq_len, f.Int("n_positions", 1024));
  ELASTRAIN_ASSIGN_OR_RETURN(m.vocab_size, f.Int("vocab_size", 50257));
  ELASTRAIN_ASSIGN_OR_RETURN(m.mlp_dim, f.Int("n_inner", 4 * m.emb_dim));
  ELASTRAIN_ASSIGN_OR_RETURN(m.norm_eps, f.Number("layer_norm_epsilon", 1e-5));
  if (m.emb_dim % m.num_heads != 0)
    return f.Bad("n_head", fmt::format("{} does not divide n_embd={}", m.num_heads, m.emb_dim));
  m.num_kv_heads = m.num_heads;
  m.head_dim = m.emb_dim / m.num_heads;
  m.mlp_activation = MlpActivation::kGelu;
  m.tie_embeddings = true;
  ELASTRAIN_ASSIGN_OR_RETURN(const std::string act, f.String("activation_function", "gelu_new"));
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    return f.Bad("activation_function", fmt::format("'{}' is not implemented (elastrain's GELU is the tanh "
                                                    "approximation: gelu_new or gelu_pytorch_tanh)", act));
  ELASTRAIN_RETURN_IF_ERROR(f.Require("scale_attn_weights", true, "attention scores are scaled by 1/sqrt(head_dim)"));
  ELASTRAIN_RETURN_IF_ERROR(f.Require("scale_attn_by_inverse_layer_idx", false, "no per-layer score scaling"));
  ELASTRAIN_RETURN_IF_ERROR(f.Require("add_cross_attention", false, "a decoder-only model"));
  ELASTRAIN_RETURN_IF_ERROR(f.Require("tie_word_embeddings", true, "GPT-2's head is its token embedding"));
  return m;
}

Result<ModelConfig> LlamaFromFields(const Fields& f, DecoderBlock block) {
  ModelConfig m;
  m.family = ModelFamily::kLlama;
  ELASTRAIN_ASSIGN_OR_RETURN(m.emb_dim, f.Int("hidden_size"));
  ELASTRAIN_ASSIGN_OR_RETURN(m.num_heads, f.Int("num_attention_heads"));
  ELASTRAIN_ASSIGN_OR_RETURN(m.num_kv_heads, f.Int("num_key_value_heads", m.num_heads));
  ELASTRAIN_ASSIGN_OR_RETURN(m.num_layers, f.Int("num_hidden_layers"));
  ELASTRAIN_ASSIGN_OR_RETURN(m.mlp_dim, f.Int("intermediate_size"));
  ELASTRAIN_ASSIGN_OR_RETURN(m.vocab_size, f.Int("vocab_size"));
  ELASTRAIN_ASSIGN_OR_RETURN(m.max_seq_len, f.Int("max_position_embeddings", 2048));
  if (!f.Has("head_dim") && m.emb_dim % m.num_heads != 0)
    return f.Bad("num_attention_heads", fmt::format("{} does not divide hidden_size={} (and no head_dim)",
                                                    m.num_heads, m.emb_dim));
  ELASTRAIN_ASSIGN_OR_RETURN(m.head_dim, f.Int("head_dim", m.emb_dim / m.num_heads));
  ELASTRAIN_ASSIGN_OR_RETURN(m.norm_eps, f.Number("rms_norm_eps", 1e-6));
  ELASTRAIN_ASSIGN_OR_RETURN(m.rope_theta, f.Number("rope_theta", 10000.0));
  ELASTRAIN_ASSIGN_OR_RETURN(m.tie_embeddings, f.Bool("tie_word_embeddings", false));
  m.mlp_activation = MlpActivation::kSwiGlu;
  ELASTRAIN_RETURN_IF_ERROR(f.Require("hidden_act", "silu", "the MLP is SwiGLU"));
  ELASTRAIN_RETURN_IF_ERROR(f.Require("mlp_bias", false, "the MLP has no biases"));
  if (block != DecoderBlock::kQwen2)
    ELASTRAIN_RETURN_IF_ERROR(f.Require("attention_bias", false, "an o_proj bias (elastrain's attention_bias is "
                                                                 "q/k/v only: Qwen2ForCausalLM)"));
  if (block != DecoderBlock::kMistral)
    ELASTRAIN_RETURN_IF_ERROR(f.Require("use_sliding_window", false, "a sliding window outside Mistral"));
  m.attention_bias = block == DecoderBlock::kQwen2;
  m.qk_norm = block == DecoderBlock::kQwen3;
  if (block == DecoderBlock::kMistral && f.Has("sliding_window")) {
    ELASTRAIN_ASSIGN_OR_RETURN(m.sliding_window, f.Int("sliding_window"));
    m.attention_layout = AttentionLayout::kAllLocal;
  }
  if (f.Has("rope_scaling")) {
    const json& r = f.Raw("rope_scaling");
    const std::string type = !r.is_object() ? std::string("?")
                             : r.contains("rope_type") && r["rope_type"].is_string() ? r["rope_type"].get<std::string>()
                             : r.contains("type") && r["type"].is_string()           ? r["type"].get<std::string>()
                                                                                      : std::string("?");
    // Meta's Llama 3.1 scaling, the one elastrain implements (rope_type llama3.1).
    const json llama31 = {{"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                          {"original_max_position_embeddings", 8192}};
    bool same = type == "llama3";
    for (const auto& [k, v] : llama31.items())
      same = same && r.contains(k) && r[k].is_number() && r[k].get<double>() == v.get<double>();
    if (!same)
      return f.Bad("rope_scaling", fmt::format("{} is not implemented (elastrain implements rope_type llama3 with "
                                               "{})", r.dump(), llama31.dump()));
    m.rope_scaling = RopeScaling::kLlama31;
  }
  return m;
}

// The first line of every HF-derived model file, and the shape keys.
std::string ShapeYaml(const ModelConfig& m, DecoderBlock block, int64_t target_length) {
  std::string out;
  out += "model_name: \"default\"  # no preset: the keys below are the whole model\n";
  out += fmt::format("decoder_block: \"{}\"\n", ChoiceWord(kDecoderBlockChoices, block));
  out += fmt::format("vocab_size: {}\n", m.vocab_size);
  out += fmt::format("base_emb_dim: {}\n", m.emb_dim);
  out += fmt::format("base_num_query_heads: {}\n", m.num_heads);
  out += fmt::format("base_num_kv_heads: {}\n", m.num_kv_heads);
  out += fmt::format("head_dim: {}\n", m.head_dim);
  out += fmt::format("base_mlp_dim: {}\n", m.mlp_dim);
  out += fmt::format("base_num_decoder_layers: {}\n", m.num_layers);
  out += fmt::format("max_target_length: {}  # tokens per sample (the model's context is {})\n", target_length,
                     m.max_seq_len);
  return out;
}

// Rows x columns of a tensor whose first dimension is `rows`.
int64_t Columns(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

}  // namespace

Result<std::string> ModelYamlFromHfConfig(const std::string& config_json, const std::string& origin) {
  json j;
  try {
    j = json::parse(config_json);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(fmt::format("{}: not JSON ({})", origin, e.what()));
  }
  if (!j.is_object()) return Status::InvalidArgument(fmt::format("{}: expected a JSON object", origin));
  ELASTRAIN_ASSIGN_OR_RETURN(const Architecture* arch, FindArchitecture(j, origin));
  const Fields f(j, origin);
  ELASTRAIN_ASSIGN_OR_RETURN(ModelConfig m, arch->block == DecoderBlock::kGpt2 ? Gpt2FromFields(f)
                                                                               : LlamaFromFields(f, arch->block));
  std::string out = fmt::format(
      "# {} ({}), in elastrain's model keys: elastrain train THIS.yml load_parameters_path=DIR\n", origin,
      arch->hf_class);
  out += ShapeYaml(m, arch->block, std::min(m.max_seq_len, kDefaultTargetLength));
  out += ModelKeysYaml(m, arch->block);
  return out;
}

Result<std::string> HfConfigFromModel(const ModelConfig& m, DecoderBlock block) {
  auto refuse = [&](const std::string& what) {
    return Status::InvalidArgument(fmt::format(
        "decoder_block={}: {} has no Hugging Face form here (exported: {})",
        ChoiceWord(kDecoderBlockChoices, block), what, kImportable));
  };
  const Architecture* arch = nullptr;
  for (const Architecture& a : kArchitectures)
    if (a.block == block) arch = &a;
  if (!arch) return refuse("the block");
  if (m.attn_logits_soft_cap > 0 || m.final_logits_soft_cap > 0) return refuse("a soft cap");
  if (m.post_attn_norm || m.post_ffw_norm || !m.pre_norm) return refuse("post norms");
  if (m.normalize_embedding_logits || m.embedding_scale != 1.0) return refuse("scaled embeddings");
  if (m.qk_norm_global) return refuse("a q/k norm over all heads");
  json j;
  j["architectures"] = {arch->hf_class};
  j["model_type"] = arch->model_type;
  j["vocab_size"] = m.vocab_size;
  j["torch_dtype"] = "float32";
  if (m.family == ModelFamily::kGpt2) {
    if (m.num_kv_heads != m.num_heads || m.num_heads * m.head_dim != m.emb_dim)
      return refuse("grouped-query attention, or heads x head_dim != emb_dim,");
    j["n_embd"] = m.emb_dim;
    j["n_head"] = m.num_heads;
    j["n_layer"] = m.num_layers;
    j["n_positions"] = m.max_seq_len;
    j["n_inner"] = m.mlp_dim;
    j["layer_norm_epsilon"] = m.norm_eps;
    j["activation_function"] = "gelu_new";
    j["tie_word_embeddings"] = true;
    return j.dump(2) + "\n";
  }
  if (m.mlp_activation != MlpActivation::kSwiGlu) return refuse("an MLP other than SwiGLU");
  if (m.attention_bias != (block == DecoderBlock::kQwen2)) return refuse("attention_bias outside qwen2");
  if (m.qk_norm != (block == DecoderBlock::kQwen3)) return refuse("use_qk_norm outside qwen3");
  if (m.sliding_window > 0 && block != DecoderBlock::kMistral) return refuse("a sliding window outside mistral");
  j["hidden_size"] = m.emb_dim;
  j["intermediate_size"] = m.mlp_dim;
  j["num_attention_heads"] = m.num_heads;
  j["num_key_value_heads"] = m.num_kv_heads;
  j["head_dim"] = m.head_dim;
  j["num_hidden_layers"] = m.num_layers;
  j["max_position_embeddings"] = m.max_seq_len;
  j["rms_norm_eps"] = m.norm_eps;
  j["rope_theta"] = m.rope_theta;
  j["hidden_act"] = "silu";
  j["tie_word_embeddings"] = m.tie_embeddings;
  if (block == DecoderBlock::kLlama) j["attention_bias"] = false, j["mlp_bias"] = false;
  if (block == DecoderBlock::kMistral) j["sliding_window"] = m.sliding_window > 0 ? json(m.sliding_window) : json();
  if (m.rope_scaling == RopeScaling::kLlama31)
    j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  else if (m.rope_scaling != RopeScaling::kNone)
    return refuse("this RoPE scaling");
  return j.dump(2) + "\n";
}

std::vector<HfTensorRule> HfTensorRules(const ModelConfig& m, DecoderBlock block, const std::string& prefix) {
  const int64_t V = m.vocab_size, C = m.emb_dim, F = m.mlp_dim, hd = m.head_dim;
  const int64_t QD = m.num_heads * hd, KD = m.num_kv_heads * hd;
  std::vector<HfTensorRule> r;
  auto add = [&](std::string hf, std::vector<int64_t> shape, std::vector<std::string> ours, HfForm form,
                 int64_t heads = 1) { r.push_back({std::move(hf), std::move(shape), std::move(ours), form, heads}); };
  if (m.family == ModelFamily::kGpt2) {
    const std::string& p = prefix;
    add(p + "wte.weight", {V, C}, {"embed.wte"}, HfForm::kSame);
    add(p + "wpe.weight", {m.max_seq_len, C}, {"embed.wpe"}, HfForm::kSame);
    for (int64_t l = 0; l < m.num_layers; ++l) {
      const std::string h = fmt::format("{}h.{}.", p, l), o = fmt::format("layers.{}.", l);
      add(h + "ln_1.weight", {C}, {o + "attn_norm.w"}, HfForm::kSame);
      add(h + "ln_1.bias", {C}, {o + "attn_norm.b"}, HfForm::kSame);
      add(h + "attn.c_attn.weight", {C, 3 * C}, {o + "attn.wq", o + "attn.wk", o + "attn.wv"}, HfForm::kFusedTransposed);
      add(h + "attn.c_attn.bias", {3 * C}, {o + "attn.bq", o + "attn.bk", o + "attn.bv"}, HfForm::kFused);
      add(h + "attn.c_proj.weight", {C, C}, {o + "attn.wo"}, HfForm::kTransposed);
      add(h + "attn.c_proj.bias", {C}, {o + "attn.bo"}, HfForm::kSame);
      add(h + "ln_2.weight", {C}, {o + "mlp_norm.w"}, HfForm::kSame);
      add(h + "ln_2.bias", {C}, {o + "mlp_norm.b"}, HfForm::kSame);
      add(h + "mlp.c_fc.weight", {C, F}, {o + "mlp.w_up"}, HfForm::kTransposed);
      add(h + "mlp.c_fc.bias", {F}, {o + "mlp.b_up"}, HfForm::kSame);
      add(h + "mlp.c_proj.weight", {F, C}, {o + "mlp.w_down"}, HfForm::kTransposed);
      add(h + "mlp.c_proj.bias", {C}, {o + "mlp.b_down"}, HfForm::kSame);
    }
    add(p + "ln_f.weight", {C}, {"final_norm.w"}, HfForm::kSame);
    add(p + "ln_f.bias", {C}, {"final_norm.b"}, HfForm::kSame);
    return r;
  }
  add("model.embed_tokens.weight", {V, C}, {"embed.wte"}, HfForm::kSame);
  for (int64_t l = 0; l < m.num_layers; ++l) {
    const std::string h = fmt::format("model.layers.{}.", l), o = fmt::format("layers.{}.", l);
    add(h + "input_layernorm.weight", {C}, {o + "attn_norm.w"}, HfForm::kSame);
    add(h + "self_attn.q_proj.weight", {QD, C}, {o + "attn.wq"}, HfForm::kRopeHalves, m.num_heads);
    add(h + "self_attn.k_proj.weight", {KD, C}, {o + "attn.wk"}, HfForm::kRopeHalves, m.num_kv_heads);
    add(h + "self_attn.v_proj.weight", {KD, C}, {o + "attn.wv"}, HfForm::kSame);
    if (m.attention_bias) {
      add(h + "self_attn.q_proj.bias", {QD}, {o + "attn.bq"}, HfForm::kRopeHalves, m.num_heads);
      add(h + "self_attn.k_proj.bias", {KD}, {o + "attn.bk"}, HfForm::kRopeHalves, m.num_kv_heads);
      add(h + "self_attn.v_proj.bias", {KD}, {o + "attn.bv"}, HfForm::kSame);
    }
    if (m.qk_norm) {  // per head, before RoPE: its dims in HF's order too
      add(h + "self_attn.q_norm.weight", {hd}, {o + "attn.q_norm.w"}, HfForm::kRopeHalves, 1);
      add(h + "self_attn.k_norm.weight", {hd}, {o + "attn.k_norm.w"}, HfForm::kRopeHalves, 1);
    }
    add(h + "self_attn.o_proj.weight", {C, QD}, {o + "attn.wo"}, HfForm::kSame);
    add(h + "post_attention_layernorm.weight", {C}, {o + "mlp_norm.w"}, HfForm::kSame);
    add(h + "mlp.gate_proj.weight", {F, C}, {o + "mlp.w_gate"}, HfForm::kSame);
    add(h + "mlp.up_proj.weight", {F, C}, {o + "mlp.w_up"}, HfForm::kSame);
    add(h + "mlp.down_proj.weight", {C, F}, {o + "mlp.w_down"}, HfForm::kSame);
  }
  add("model.norm.weight", {C}, {"final_norm.w"}, HfForm::kSame);
  if (!m.tie_embeddings) add("lm_head.weight", {V, C}, {"lm_head.w"}, HfForm::kSame);
  (void)block;
  return r;
}

bool IsHfBuffer(const std::string& n) {
  auto ends = [&](const std::string& s) { return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0; };
  return ends(".attn.bias") || ends(".attn.masked_bias") || ends("rotary_emb.inv_freq");
}

std::vector<float> OursFromHf(const HfTensorRule& rule, size_t part, const std::vector<float>& hf,
                              const std::vector<int64_t>& our_shape) {
  const int64_t rows = our_shape.empty() ? 1 : our_shape[0], cols = Columns(our_shape);
  std::vector<float> out(static_cast<size_t>(rows * cols));
  switch (rule.form) {
    case HfForm::kSame:
      out = hf;
      break;
    case HfForm::kTransposed:  // ours [rows, cols] = hf [cols, rows]^T
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) out[i * cols + j] = hf[j * rows + i];
      break;
    case HfForm::kFusedTransposed: {  // hf [cols, parts*rows]
      const int64_t width = static_cast<int64_t>(rule.ours.size()) * rows, off = static_cast<int64_t>(part) * rows;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) out[i * cols + j] = hf[j * width + off + i];
      break;
    }
    case HfForm::kFused:
      std::copy_n(hf.begin() + static_cast<int64_t>(part) * rows, rows, out.begin());
      break;
    case HfForm::kRopeHalves: {  // ours row h*hd + 2k + s = hf row h*hd + s*hd/2 + k
      const int64_t hd = rows / rule.heads, half = hd / 2;
      for (int64_t h = 0; h < rule.heads; ++h)
        for (int64_t k = 0; k < half; ++k)
          for (int64_t s = 0; s < 2; ++s)
            std::copy_n(hf.begin() + (h * hd + s * half + k) * cols, cols, out.begin() + (h * hd + 2 * k + s) * cols);
      break;
    }
  }
  return out;
}

std::vector<float> HfFromOurs(const HfTensorRule& rule, const std::vector<std::vector<float>>& ours,
                              const std::vector<std::vector<int64_t>>& our_shapes) {
  const std::vector<int64_t>& shape = our_shapes[0];
  const int64_t rows = shape.empty() ? 1 : shape[0], cols = Columns(shape);
  const int64_t parts = static_cast<int64_t>(ours.size());
  std::vector<float> hf(static_cast<size_t>(rows * cols * parts));
  switch (rule.form) {
    case HfForm::kSame:
      hf = ours[0];
      break;
    case HfForm::kTransposed:
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) hf[j * rows + i] = ours[0][i * cols + j];
      break;
    case HfForm::kFusedTransposed:
      for (int64_t p = 0; p < parts; ++p)
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j) hf[j * parts * rows + p * rows + i] = ours[p][i * cols + j];
      break;
    case HfForm::kFused:
      for (int64_t p = 0; p < parts; ++p) std::copy_n(ours[p].begin(), rows, hf.begin() + p * rows);
      break;
    case HfForm::kRopeHalves: {
      const int64_t hd = rows / rule.heads, half = hd / 2;
      for (int64_t h = 0; h < rule.heads; ++h)
        for (int64_t k = 0; k < half; ++k)
          for (int64_t s = 0; s < 2; ++s)
            std::copy_n(ours[0].begin() + (h * hd + 2 * k + s) * cols, cols, hf.begin() + (h * hd + s * half + k) * cols);
      break;
    }
  }
  return hf;
}

}  // namespace elastrain::convert
