// Model shapes and presets. A ModelConfig is pure data: the shapes of a decoder-only
// transformer of one of two families. Parameter layout and FLOP/memory estimates are
// derived from it (model/layout.h, model/flops.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/choice.h"
#include "common/status.h"

namespace elastrain {

enum class ModelFamily {
  kLlama,  // RMSNorm, RoPE, grouped-query attention, SwiGLU, untied output head
  kGpt2,   // LayerNorm, GELU, learned positions, tied embeddings, biases
};
// The families' names (the decoder_block words, MaxText's blocks among them, are
// config/decoder_block.h's).
inline constexpr std::array<Choice<ModelFamily>, 2> kModelFamilyChoices = {{
    {"llama", ModelFamily::kLlama},
    {"gpt2", ModelFamily::kGpt2},
}};
const char* FamilyName(ModelFamily f);                 // "llama" / "gpt2"

// The documented ranges of the shape keys (configs/base.yml). Within them every size
// derived from a valid ModelConfig (parameter counts, offsets, bytes of the training
// state) fits int64 with room to spare; Validate also checks the parameter count itself
// with overflow-checked arithmetic against kMaxModelParams.
inline constexpr int64_t kMaxVocabSize = int64_t{1} << 24;   // vocab_size <= 16,777,216
inline constexpr int64_t kMaxEmbDim = int64_t{1} << 17;      // base_emb_dim <= 131,072
inline constexpr int64_t kMaxLayers = int64_t{1} << 12;      // base_num_decoder_layers <= 4,096
inline constexpr int64_t kMaxHeads = int64_t{1} << 12;       // base_num_{query,kv}_heads <= 4,096
inline constexpr int64_t kMaxHeadDim = int64_t{1} << 12;     // head_dim <= 4,096
inline constexpr int64_t kMaxMlpDim = int64_t{1} << 20;      // base_mlp_dim <= 1,048,576
inline constexpr int64_t kMaxSeqLen = int64_t{1} << 20;      // max_target_length <= 1,048,576
inline constexpr int64_t kMaxModelParams = int64_t{1} << 50;  // 16 bytes each (params, grads, m, v) < 2^54

// MaxText's mlp_activations: ["silu","linear"] is SwiGLU, ["gelu","linear"] GeGLU (gemma),
// ["gelu"] a plain GELU MLP (gpt3). GELU is the tanh approximation (jax.nn.gelu's default).
enum class MlpActivation { kSwiGlu, kGeGlu, kGelu };
// MaxText's RoPE variants: default (theta = rope_max_timescale), llama3.1 (the frequency
// scaling of LLaMARotaryEmbedding with rope_use_scale: factor 8, low/high frequency
// factors 1 and 4, original context 8192).
// kYarn (olmo3-7b/32b, deepseek) parses so that it can be refused by name: not implemented.
enum class RopeScaling { kNone, kLlama31, kYarn };
// Which layers attend within a sliding window of sliding_window tokens: none, all of them
// (mistral with sliding_window_size set), or even layers local and odd layers global
// (gemma2, whose MaxText layer is a [local, global] pair: num_layers counts real layers).
// kOlmo3: layers 4i, 4i+1, 4i+2 local and 4i+3 global (MaxText's OLMO3_ATTENTION_PATTERN).
enum class AttentionLayout { kGlobal, kAllLocal, kAlternating, kOlmo3 };

struct ModelConfig {
  std::string name = "default";
  ModelFamily family = ModelFamily::kLlama;
  int64_t vocab_size = 0;   // V
  int64_t emb_dim = 0;      // C (MaxText: base_emb_dim)
  int64_t num_layers = 0;   // L (base_num_decoder_layers)
  int64_t num_heads = 0;    // Hq (base_num_query_heads)
  int64_t num_kv_heads = 0; // Hkv (base_num_kv_heads); must divide Hq; gpt2 needs Hkv == Hq
  int64_t head_dim = 0;     // hd; Hq*hd need not equal C for llama (it does for gpt2)
  int64_t mlp_dim = 0;      // F (base_mlp_dim)
  int64_t max_seq_len = 0;  // learned positions for gpt2; the longest T for both
  double norm_eps = 1e-5;     // normalization_layer_epsilon
  double rope_theta = 10000.0;  // rope_max_timescale

  // MaxText's model-defining keys beyond the shapes (docs/maxtext.md). The defaults are
  // the two families' plain forms; Validate refuses what the transformer does not
  // implement yet, naming the MaxText key.
  MlpActivation mlp_activation = MlpActivation::kSwiGlu;  // mlp_activations (gpt2 family: kGelu)
  bool tie_embeddings = false;          // logits_via_embedding (the gpt2 family: always)
  bool normalize_embedding_logits = false;  // tied logits divided by sqrt(emb_dim)
  double embedding_scale = 1.0;         // token embeddings times this (gemma: sqrt(emb_dim))
  RopeScaling rope_scaling = RopeScaling::kNone;
  bool attention_bias = false;          // attention_bias: biases of q, k, v (qwen2.5)
  bool qk_norm = false;                 // use_qk_norm: RMSNorm of q and k per head (qwen3)
  bool qk_norm_global = false;          // with qk_norm: one RMSNorm over all q heads and one over all
                                        // k heads, scales (Hq*hd) and (Hkv*hd) (MaxText: model_name olmo3*)
  int64_t sliding_window = 0;           // sliding_window_size (0: none)
  AttentionLayout attention_layout = AttentionLayout::kGlobal;
  double attn_logits_soft_cap = 0.0;    // cap*tanh(s/cap) of attention scores (0: none)
  double final_logits_soft_cap = 0.0;   // the same of the output logits
  bool post_attn_norm = false;          // use_post_attn_norm (gemma2): a norm of the block's output
  bool post_ffw_norm = false;           // use_post_ffw_norm
  bool pre_norm = true;                 // false: no norm before attention and MLP (olmo3, whose
                                        // layers norm only their outputs: needs both post norms)
  double z_loss = 0.0;                  // z_loss_multiplier: + z * logsumexp(logits)^2 per token

  // Returns a clear error naming the key (MaxText name) and value when a shape is out
  // of its range (above) or shapes are inconsistent, e.g. "base_num_query_heads=6 is not
  // divisible by base_num_kv_heads=4", or the parameter count exceeds kMaxModelParams.
  Status Validate() const;
  int64_t NumParams() const;  // exact count of trainable parameters (of a valid config)
};

// Presets: tiny, tiny-gpt2 (tests), small (~13M llama), gpt2-124m, and MaxText's
// llama2-7b, llama2-13b, llama2-70b, llama3-8b, llama3-70b, gpt3-52k, gpt3-6b, gpt3-22b,
// gpt3-175b (the shapes of its configs/models/<name>.yml); and the small test presets of
// the families (tests/integration/test_family_reference.sh): tiny-llama31, tiny-mistral,
// tiny-qwen2, tiny-qwen3, tiny-gemma, tiny-gemma2, tiny-zloss, tiny-gpt3, tiny-olmo3.
Result<ModelConfig> ModelPreset(const std::string& name);
std::vector<std::string> ModelPresetNames();

}  // namespace elastrain
