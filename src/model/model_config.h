// Model shapes and presets. A ModelConfig is pure data: the shapes of a decoder-only
// transformer of one of two families. Parameter layout and FLOP/memory estimates are
// derived from it (model/layout.h, model/flops.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace elastrain {

enum class ModelFamily {
  kLlama,  // RMSNorm, RoPE, grouped-query attention, SwiGLU, untied output head
  kGpt2,   // LayerNorm, GELU, learned positions, tied embeddings, biases
};
const char* FamilyName(ModelFamily f);                 // "llama" / "gpt2"
Result<ModelFamily> ParseFamily(const std::string& s);  // accepts llama, llama2, llama3, gpt2, gpt3

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
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;

  // Returns a clear error naming the key (MaxText name) and value when shapes are
  // inconsistent, e.g. "base_num_query_heads=6 is not divisible by base_num_kv_heads=4".
  Status Validate() const;
  int64_t NumParams() const;  // exact count of trainable parameters
};

// Presets: tiny, tiny-gpt2 (tests), small (~13M llama), gpt2-124m, llama2-7b, llama3-8b.
Result<ModelConfig> ModelPreset(const std::string& name);
std::vector<std::string> ModelPresetNames();

}  // namespace elastrain
