#include "config/model_keys.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "config/config_keys.h"

namespace elastrain {
namespace {

// What the keys set, before the block's rules finish the model.
struct Building {
  ModelConfig m;
  DecoderBlock block = DecoderBlock::kLlama;
  bool layers_from_key = false;   // base_num_decoder_layers given (gemma2 counts pairs)
  std::string rope_type = "default";
  bool rope_use_scale = true;
  std::string attention_type = "global";
  int64_t trainable_position_size = -1;
};

std::string Where(const KeySetting& s) { return s.source.empty() ? "" : s.source + ": "; }

Status Bad(const KeySetting& s, std::string_view key, const std::string& text, std::string_view expected) {
  return Status::InvalidArgument(fmt::format("{}{}={}: expected {}", Where(s), key, text, expected));
}

bool ParseBool(const std::string& t, bool* v) {
  if (t == "true" || t == "True" || t == "1") return *v = true, true;
  if (t == "false" || t == "False" || t == "0") return *v = false, true;
  return false;
}

using Apply = Status (*)(const KeySetting& s, const std::string& text, Building* b);

struct ModelKeyDef {
  const char* name;
  Apply apply;
};

Status ShapeKey(const KeySetting& s, std::string_view key, const std::string& t, int64_t* field) {
  int64_t v = 0;
  if (!ParseConfigInteger(t, &v) || v < 0) return Bad(s, key, t, "a positive integer, or 0 for the model_name preset's");
  if (v > 0) *field = v;
  return Status::OK();
}
Status NonNegative(const KeySetting& s, std::string_view key, const std::string& t, double* field) {
  double v = 0;
  if (!ParseConfigNumber(t, &v) || v < 0) return Bad(s, key, t, "a number >= 0 (0: off)");
  *field = v;
  return Status::OK();
}
Status Positive(const KeySetting& s, std::string_view key, const std::string& t, double* field) {
  double v = 0;
  if (!ParseConfigNumber(t, &v) || !(v > 0)) return Bad(s, key, t, "a number > 0");
  *field = v;
  return Status::OK();
}
Status Flag(const KeySetting& s, std::string_view key, const std::string& t, bool* field) {
  if (!ParseBool(t, field)) return Bad(s, key, t, "true or false");
  return Status::OK();
}

#define SHAPE(key, f) \
  {key, +[](const KeySetting& s, const std::string& t, Building* b) { return ShapeKey(s, key, t, &b->m.f); }}
#define FLAG(key, f) {key, +[](const KeySetting& s, const std::string& t, Building* b) { return Flag(s, key, t, &f); }}

// Every model key but decoder_block (which decides the defaults the others start from).
const std::vector<ModelKeyDef>& ModelKeyDefs() {
  static const std::vector<ModelKeyDef> defs = {
      SHAPE("base_emb_dim", emb_dim),
      SHAPE("base_num_query_heads", num_heads),
      SHAPE("base_num_kv_heads", num_kv_heads),
      SHAPE("base_mlp_dim", mlp_dim),
      {"base_num_decoder_layers",
       +[](const KeySetting& s, const std::string& t, Building* b) {
         const int64_t before = b->m.num_layers;
         ELASTRAIN_RETURN_IF_ERROR(ShapeKey(s, "base_num_decoder_layers", t, &b->m.num_layers));
         if (b->m.num_layers != before || t != "0") b->layers_from_key = b->layers_from_key || t != "0";
         return Status::OK();
       }},
      SHAPE("head_dim", head_dim),
      SHAPE("vocab_size", vocab_size),
      {"mlp_activations",
       +[](const KeySetting& s, const std::string& t, Building* b) {
         std::string w = t;
         std::erase_if(w, [](char c) { return c == ' ' || c == '[' || c == ']' || c == '\'' || c == '"'; });
         if (w == "silu,linear") b->m.mlp_activation = MlpActivation::kSwiGlu;
         else if (w == "gelu,linear") b->m.mlp_activation = MlpActivation::kGeGlu;
         else if (w == "gelu") b->m.mlp_activation = MlpActivation::kGelu;
         else return Bad(s, "mlp_activations", "[" + t + "]", "[silu, linear] (SwiGLU), [gelu, linear] (GeGLU) or [gelu]");
         return Status::OK();
       }},
      FLAG("logits_via_embedding", b->m.tie_embeddings),
      FLAG("normalize_embedding_logits", b->m.normalize_embedding_logits),
      {"normalization_layer_epsilon",
       +[](const KeySetting& s, const std::string& t, Building* b) {
         return Positive(s, "normalization_layer_epsilon", t, &b->m.norm_eps);
       }},
      {"rope_max_timescale",
       +[](const KeySetting& s, const std::string& t, Building* b) {
         return Positive(s, "rope_max_timescale", t, &b->m.rope_theta);
       }},
      {"rope_type",
       +[](const KeySetting& s, const std::string& t, Building* b) {
         if (t == "default" || t == "llama3.1") return b->rope_type = t, Status::OK();
         return Status::InvalidArgument(fmt::format(
             "{}rope_type={}: not implemented (elastrain implements default and llama3.1)", Where(s), t));
       }},
      FLAG("rope_use_scale", b->rope_use_scale),
      FLAG("attention_bias", b->m.attention_bias),
      FLAG("use_qk_norm", b->m.qk_norm),
      {"sliding_window_size",
       +[](const KeySetting& s, const std::string& t, Building* b) {
         int64_t v = 0;
         if (!ParseConfigInteger(t, &v) || v < 0) return Bad(s, "sliding_window_size", t, "an integer >= 0 (0: none)");
         b->m.sliding_window = v;
         return Status::OK();
       }},
      {"attention_type",
       +[](const KeySetting& s, const std::string& t, Building* b) {
         if (t == "global" || t == "local_sliding") return b->attention_type = t, Status::OK();
         return Status::InvalidArgument(fmt::format(
             "{}attention_type={}: not implemented (elastrain implements global and local_sliding attention)", Where(s),
             t));
       }},
      {"attn_logits_soft_cap",
       +[](const KeySetting& s, const std::string& t, Building* b) {
         return NonNegative(s, "attn_logits_soft_cap", t, &b->m.attn_logits_soft_cap);
       }},
      {"final_logits_soft_cap",
       +[](const KeySetting& s, const std::string& t, Building* b) {
         return NonNegative(s, "final_logits_soft_cap", t, &b->m.final_logits_soft_cap);
       }},
      FLAG("use_post_attn_norm", b->m.post_attn_norm),
      FLAG("use_post_ffw_norm", b->m.post_ffw_norm),
      {"z_loss_multiplier",
       +[](const KeySetting& s, const std::string& t, Building* b) {
         return NonNegative(s, "z_loss_multiplier", t, &b->m.z_loss);
       }},
      {"trainable_position_size",
       +[](const KeySetting& s, const std::string& t, Building* b) {
         int64_t v = 0;
         if (!ParseConfigInteger(t, &v) || v == 0 || v < -1 || v > kMaxSeqLen)
           return Bad(s, "trainable_position_size", t, fmt::format("-1 (none) or a size in [1, {}]", kMaxSeqLen));
         b->trainable_position_size = v;
         return Status::OK();
       }},
  };
  return defs;
}
#undef SHAPE
#undef FLAG

// A MaxText key elastrain trains as MaxText means it only at these values.
struct NeutralOnly {
  std::string_view key;
  std::vector<std::string_view> words;  // allowed values; numbers compare as numbers, "[]" an empty list
  std::string_view instead;             // what elastrain does
};

const std::vector<NeutralOnly>& NeutralOnlyTable() {
  static const std::vector<NeutralOnly> table = {
      // The objective and the optimizer.
      {"lr_schedule_type", {"cosine"}, "elastrain's schedule is MaxText's cosine one: linear warmup, cosine decay"},
      {"opt_type", {"adamw", "adam_pax"}, "elastrain trains with AdamW"},
      {"training_objective", {"causal_lm"}, "elastrain trains causal language models"},
      {"use_dpo", {"false"}, "elastrain pre-trains (causal_lm); DPO is not implemented"},
      {"use_sft", {"false"}, "elastrain pre-trains on every token; SFT's prompt masking is not implemented"},
      {"skip_step_on_spikes", {"false"}, "elastrain applies every step"},
      {"enable_diloco", {"false"}, "elastrain synchronises every step"},
      {"use_qk_clip", {"false"}, "elastrain does not clip q/k weights"},
      {"load_balance_loss_weight", {"0"}, "elastrain trains dense models (no router loss)"},
      {"mtp_num_layers", {"0"}, "elastrain predicts the next token only"},
      {"rl", {""}, "elastrain pre-trains; reinforcement learning is not implemented"},
      {"teacher_overrides", {""}, "elastrain trains one model on the data; distillation from a teacher is not implemented"},
      {"dropout_rate", {"0"}, "elastrain trains without dropout"},
      {"quantization", {""}, "elastrain trains unquantized"},
      {"mu_dtype", {"", "float32"}, "elastrain keeps AdamW's moments in float32"},
      {"grad_dtype", {"", "float32"}, "elastrain keeps gradients in float32"},
      {"weight_sparsity_n", {""}, "elastrain trains dense weights"},
      // The architecture.
      {"num_experts", {"1"}, "elastrain trains dense models"},
      {"global_parameter_scale", {"1"}, "set the shape keys (base_emb_dim, ...) instead"},
      {"dense_init_scale", {"1"}, "elastrain initialises with N(0, 0.02) (residual projections / sqrt(2L))"},
      {"mlp_activations_limit", {"-1"}, "elastrain does not clamp activations"},
      {"mlp_bias", {"false"}, "elastrain's llama-family MLPs have no biases"},
      {"attention_output_dim", {"-1"}, "the attention output is num_query_heads * head_dim"},
      {"global_head_dim", {"0"}, "every layer has head_dim"},
      {"global_num_kv_heads", {"0"}, "every layer has base_num_kv_heads"},
      {"share_kv_projections", {"false"}, "k and v have their own projections"},
      {"attention_sink", {"false"}, "elastrain's attention has no sink"},
      {"use_untrainable_positional_embedding", {"false"}, "positions come from RoPE or a learned table"},
      {"rope_min_timescale", {"1"}, "RoPE frequencies run from 1 to rope_max_timescale"},
      {"local_rope_max_timescale", {"-1"}, "local and global layers share rope_max_timescale"},
      {"global_rope_max_timescale", {"-1"}, "local and global layers share rope_max_timescale"},
      {"rope_linear_scaling_factor", {"1"}, "positions are not scaled"},
      {"partial_rotary_factor", {"1"}, "RoPE rotates every dimension of a head"},
      {"use_mrope", {"false"}, "elastrain's RoPE is one-dimensional"},
      {"nope_layer_interval", {"-1"}, "every layer uses RoPE"},
      {"inhomogeneous_layer_cycle_interval", {"1"}, "every layer is alike (gemma2's pairs come from its block)"},
      {"interleave_moe_layer_step", {"1"}, "elastrain trains dense models"},
      {"qk_norm_with_scale", {"true"}, "use_qk_norm learns a scale"},
      {"v_norm_with_scale", {"true"}, "v is not normalised"},
      {"hidden_size_per_layer_input", {"0"}, "layers take only the residual stream"},
      {"vocab_size_per_layer_input", {"0"}, "layers take only the residual stream"},
      {"num_kv_shared_layers", {"0"}, "each layer has its own k and v"},
      {"use_double_wide_mlp", {"false"}, "the MLP is base_mlp_dim wide"},
      {"moba", {"false"}, "attention is dense"},
      {"use_indexer", {"false"}, "attention is dense"},
      {"mhc_expansion_rate", {"1"}, "one residual stream"},
      {"engram_layers", {"[]"}, "no engram layers"},
      {"first_num_hash_layers", {"0"}, "elastrain trains dense models"},
      {"use_multimodal", {"false"}, "elastrain trains text models"},
      {"enable_mhc_lite", {"false"}, "one residual stream"},
  };
  return table;
}

const NeutralOnly* FindNeutralOnly(std::string_view key) {
  for (const NeutralOnly& n : NeutralOnlyTable())
    if (n.key == key) return &n;
  return nullptr;
}

bool SameNumber(std::string text, std::string_view want) {
  std::erase(text, '_');
  double a = 0, b = 0;
  return ParseConfigNumber(text, &a) && ParseConfigNumber(std::string(want), &b) && a == b;
}

bool IsNeutral(const NeutralOnly& n, const YAML::Node& v) {
  if (v.IsNull()) return true;  // MaxText's None: the key is off
  if (v.IsSequence()) {
    for (std::string_view w : n.words)
      if (w == "[]" && v.size() == 0) return true;
    return false;
  }
  if (!v.IsScalar()) return false;
  std::string t = v.Scalar();
  for (std::string_view w : n.words) {
    if (t == w) return true;
    double d = 0;
    if (ParseConfigNumber(std::string(w), &d) && SameNumber(t, w)) return true;
    if ((w == "true" || w == "false") && (t == (w == "true" ? "True" : "False"))) return true;
  }
  return false;
}

// The defaults a block starts from (MaxText's base.yml values, or the gpt2 family's).
void BlockDefaults(DecoderBlock block, ModelConfig* m) {
  m->family = FamilyOf(block);
  const bool gpt2 = block == DecoderBlock::kGpt2;
  m->mlp_activation = gpt2 ? MlpActivation::kGelu : MlpActivation::kSwiGlu;
  m->tie_embeddings = gpt2;
  m->normalize_embedding_logits = !gpt2;  // MaxText's base.yml: true (it acts only on a tied head)
  m->attention_layout = AttentionLayout::kGlobal;
  const bool olmo3 = block == DecoderBlock::kOlmo3;
  m->pre_norm = !olmo3;
  m->post_attn_norm = m->post_ffw_norm = olmo3;
  m->qk_norm_global = olmo3;
}

// The block a preset's model is (presets hold the family and the features, not the word).
DecoderBlock BlockOfPreset(const ModelConfig& m) {
  if (m.family == ModelFamily::kGpt2) return DecoderBlock::kGpt2;
  if (!m.pre_norm) return DecoderBlock::kOlmo3;
  if (m.attention_layout == AttentionLayout::kAlternating && m.mlp_activation == MlpActivation::kGeGlu)
    return DecoderBlock::kGemma2;
  if (m.mlp_activation == MlpActivation::kGeGlu) return DecoderBlock::kGemma;
  if (m.attention_layout == AttentionLayout::kAllLocal) return DecoderBlock::kMistral;
  return DecoderBlock::kLlama;
}

const KeySetting* Winner(const ModelInputs& in, std::string_view key) {
  if (auto it = in.user.find(key); it != in.user.end()) return &it->second;
  if (auto it = in.maxtext.find(key); it != in.maxtext.end()) return &it->second;
  return nullptr;
}

bool StartsWith(const std::string& s, std::string_view p) { return s.compare(0, p.size(), p) == 0; }

}  // namespace

bool IsModelKey(std::string_view key) {
  if (key == "decoder_block") return true;
  for (const ModelKeyDef& d : ModelKeyDefs())
    if (d.name == key) return true;
  return false;
}

bool IsRefusedUnlessNeutralKey(std::string_view key) { return FindNeutralOnly(key) != nullptr; }

std::string NeutralValues(std::string_view key) {
  const NeutralOnly* n = FindNeutralOnly(key);
  if (!n) return "";
  std::string out;
  for (std::string_view w : n->words) out += fmt::format("{}{}", out.empty() ? "" : " or ", w.empty() ? "\"\"" : w);
  return out;
}

std::string RefusalReason(std::string_view key) {
  const NeutralOnly* n = FindNeutralOnly(key);
  return n ? std::string(n->instead) : "";
}

Result<std::string> ValueText(std::string_view key, const YAML::Node& v) {
  if (v.IsNull()) return std::string();
  if (v.IsScalar()) return v.Scalar();
  if (v.IsSequence()) {
    std::string out;
    for (const YAML::Node& e : v) {
      if (!e.IsScalar()) return Status::InvalidArgument(fmt::format("{}: expected a list of words", key));
      out += (out.empty() ? "" : ",") + e.Scalar();
    }
    return out;
  }
  return Status::InvalidArgument(fmt::format("{}: expected a value or a list, not a mapping", key));
}

Result<BuiltModel> BuildModel(const ModelInputs& in) {
  // Keys MaxText does not implement beyond one value: judged where they stand (olmo3's
  // block is its cycle of 4 layers).
  const KeySetting* block_setting = Winner(in, "decoder_block");
  const bool olmo3 = block_setting && block_setting->value.IsScalar() && block_setting->value.Scalar() == "olmo3";
  for (const KeyLayer* layer : {&in.maxtext, &in.user})
    for (const auto& [key, s] : *layer) {
      const NeutralOnly* n = FindNeutralOnly(key);
      if (!n || Winner(in, key) != &s || IsNeutral(*n, s.value)) continue;
      if (olmo3 && key == "inhomogeneous_layer_cycle_interval" && s.value.IsScalar() && s.value.Scalar() == "4")
        continue;
      auto text = ValueText(key, s.value);
      return Status::InvalidArgument(fmt::format("{}{}={}: not implemented; elastrain trains {}={} ({})", Where(s), key,
                                                 text.ok() ? *text : "(a mapping)", key, NeutralValues(key),
                                                 n->instead));
    }

  Building b;
  const bool preset = in.model_name != "default" && !in.maxtext_model_file;
  std::optional<DecoderBlock> preset_block;
  if (preset) {
    ELASTRAIN_ASSIGN_OR_RETURN(b.m, ModelPreset(in.model_name));
    preset_block = BlockOfPreset(b.m);
  }
  // The block: the user's, else the preset's, else the MaxText files', else llama.
  b.block = preset_block.value_or(DecoderBlock::kLlama);
  const KeySetting* bs = in.user.count("decoder_block") ? &in.user.at("decoder_block")
                         : preset                       ? nullptr
                                                        : Winner(in, "decoder_block");
  if (bs) {
    ELASTRAIN_ASSIGN_OR_RETURN(const std::string word, ValueText("decoder_block", bs->value));
    const auto parsed = ParseChoice(kDecoderBlockChoices, word);
    if (!parsed)
      return Status::InvalidArgument(Where(*bs) + ChoiceRefusal(kDecoderBlockChoices, "decoder_block=" + word) +
                                     kDecoderBlockRefusalHint);
    b.block = *parsed;
  }
  if (!preset || b.block != *preset_block) BlockDefaults(b.block, &b.m);

  // A preset is a whole model: the MaxText files' model keys below it do not apply.
  std::vector<const KeyLayer*> layers;
  if (!preset) layers.push_back(&in.maxtext);
  layers.push_back(&in.user);
  for (const KeyLayer* layer : layers)
    for (const ModelKeyDef& d : ModelKeyDefs()) {
      auto it = layer->find(d.name);
      if (it == layer->end()) continue;
      ELASTRAIN_ASSIGN_OR_RETURN(const std::string text, ValueText(d.name, it->second.value));
      ELASTRAIN_RETURN_IF_ERROR(d.apply(it->second, text, &b));
    }

  ModelConfig& m = b.m;
  m.name = in.model_name;
  // MaxText's gemma blocks scale nothing at run time: its checkpoint conversion stores the
  // embedding table times sqrt(emb_dim), and the tied logits are divided by sqrt(emb_dim)
  // (normalize_embedding_logits). Training from scratch, elastrain does as MaxText does.
  if (!m.tie_embeddings) m.normalize_embedding_logits = false;
  if (!m.qk_norm) m.qk_norm_global = false;  // olmo3's all-heads form of use_qk_norm
  const bool llama31_name = StartsWith(in.model_name, "llama3.1") || StartsWith(in.model_name, "llama3.3");
  if ((b.rope_type == "llama3.1" || llama31_name) && b.rope_use_scale && m.family == ModelFamily::kLlama)
    m.rope_scaling = RopeScaling::kLlama31;
  if (b.block == DecoderBlock::kGemma2) {
    // MaxText's gemma2 layer is a [local, global] pair: the key counts pairs.
    if (b.layers_from_key) m.num_layers *= 2;
    if (m.sliding_window <= 0)
      return Status::InvalidArgument(
          "sliding_window_size=0: decoder_block=gemma2 alternates sliding-window and global layers; expected a "
          "window > 0 (gemma2's files set 4096)");
    m.attention_layout = AttentionLayout::kAlternating;
  } else if (b.block == DecoderBlock::kOlmo3 && m.sliding_window > 0) {
    m.attention_layout = AttentionLayout::kOlmo3;  // layers 4i..4i+2 local, 4i+3 global
  } else if (m.sliding_window > 0 && (b.block == DecoderBlock::kMistral || b.attention_type == "local_sliding")) {
    m.attention_layout = AttentionLayout::kAllLocal;
  } else {
    m.sliding_window = 0;  // MaxText's global attention ignores the window
  }
  if (b.trainable_position_size > 0 && m.family != ModelFamily::kGpt2)
    return Status::InvalidArgument(fmt::format(
        "trainable_position_size={}: learned positions belong to decoder_block gpt3/gpt2; decoder_block={} uses RoPE",
        b.trainable_position_size, ChoiceWord(kDecoderBlockChoices, b.block)));
  return BuiltModel{m, b.block, b.trainable_position_size};
}

std::string ModelKeysYaml(const ModelConfig& m, DecoderBlock block) {
  auto flag = [](bool v) { return v ? "true" : "false"; };
  const char* mlp = m.mlp_activation == MlpActivation::kSwiGlu  ? "[\"silu\", \"linear\"]"
                    : m.mlp_activation == MlpActivation::kGeGlu ? "[\"gelu\", \"linear\"]"
                                                                : "[\"gelu\"]";
  std::string out;
  out += fmt::format("mlp_activations: {}  # [silu, linear] SwiGLU | [gelu, linear] GeGLU | [gelu]\n", mlp);
  out += fmt::format("logits_via_embedding: {}  # the output head is the token embedding\n", flag(m.tie_embeddings));
  out += fmt::format("normalize_embedding_logits: {}  # a tied head's logits / sqrt(base_emb_dim)\n",
                     flag(m.normalize_embedding_logits));
  out += fmt::format("normalization_layer_epsilon: {}  # epsilon of RMSNorm / LayerNorm\n", m.norm_eps);
  out += fmt::format("rope_max_timescale: {}  # RoPE theta\n", m.rope_theta);
  out += fmt::format("rope_type: \"{}\"  # default | llama3.1 (frequency scaling)\n",
                     m.rope_scaling == RopeScaling::kLlama31 ? "llama3.1" : "default");
  out += fmt::format("attention_bias: {}  # biases of q, k and v\n", flag(m.attention_bias));
  out += fmt::format("use_qk_norm: {}  # RMSNorm of each q and k head\n", flag(m.qk_norm));
  out += fmt::format("attention_type: \"{}\"  # global | local_sliding (every layer within sliding_window_size)\n",
                     m.attention_layout == AttentionLayout::kAllLocal && block != DecoderBlock::kMistral
                         ? "local_sliding"
                         : "global");
  out += fmt::format("sliding_window_size: {}  # tokens a local layer sees (0: none)\n", m.sliding_window);
  out += fmt::format("attn_logits_soft_cap: {}  # cap*tanh(score/cap) (0: none)\n", m.attn_logits_soft_cap);
  out += fmt::format("final_logits_soft_cap: {}  # cap*tanh(logit/cap) (0: none)\n", m.final_logits_soft_cap);
  out += fmt::format("use_post_attn_norm: {}  # a norm of the attention block's output\n", flag(m.post_attn_norm));
  out += fmt::format("use_post_ffw_norm: {}  # a norm of the MLP block's output\n", flag(m.post_ffw_norm));
  out += fmt::format("z_loss_multiplier: {}  # + z * logsumexp(logits)^2 per token\n", m.z_loss);
  if (m.family == ModelFamily::kGpt2)
    out += fmt::format("trainable_position_size: {}  # learned positions (gpt2/gpt3)\n", m.max_seq_len);
  return out;
}

}  // namespace elastrain
