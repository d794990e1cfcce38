// MaxText's decoder_block: which decoder a config describes. Each block is one of the two
// skeletons of model/model_config.h (the llama family: RMSNorm, RoPE, gated MLP; the gpt2
// family: LayerNorm, learned positions) with the defaults MaxText's block of that name
// implies (docs/maxtext.md "Decoder blocks"); the config's keys do the rest.
#pragma once

#include <array>

#include "common/choice.h"
#include "model/model_config.h"

namespace elastrain {

enum class DecoderBlock {
  kLlama,    // llama2 / llama3 / llama3.1 (MaxText's llama2 block)
  kGpt2,     // gpt2 and MaxText's gpt3
  kMistral,  // llama with a sliding window when sliding_window_size is set
  kGemma,    // nothing at run time (its files: GeGLU, a tied head divided by sqrt(emb_dim))
  kGemma2,   // [local, global] layer pairs (its files: gemma's, soft caps, post norms)
  kQwen2,    // llama with q/k/v biases (attention_bias)
  kQwen3,    // llama with q/k RMSNorm (use_qk_norm)
  kOlmo3,    // llama without pre-norms: post norms, q/k norms over all heads, 3 local + 1 global layers
};
// The first word of each value is its name; the others are MaxText's and elastrain's
// older words for the same block.
inline constexpr std::array<Choice<DecoderBlock>, 12> kDecoderBlockChoices = {{
    {"llama", DecoderBlock::kLlama},
    {"gpt2", DecoderBlock::kGpt2},
    {"mistral", DecoderBlock::kMistral},
    {"gemma", DecoderBlock::kGemma},
    {"gemma2", DecoderBlock::kGemma2},
    {"qwen2", DecoderBlock::kQwen2},
    {"qwen3", DecoderBlock::kQwen3},
    {"olmo3", DecoderBlock::kOlmo3},
    {"llama2", DecoderBlock::kLlama},
    {"llama3", DecoderBlock::kLlama},
    {"gpt3", DecoderBlock::kGpt2},
    {"gpt", DecoderBlock::kGpt2},
}};
// Appended to the error of a decoder_block outside the table.
inline constexpr const char* kDecoderBlockRefusalHint =
    " (MaxText's llama2, llama3, gpt3 name these too; its mixtral, deepseek, gemma3, gemma4, llama4, qwen3_moe, "
    "qwen3_next, gpt_oss and other blocks are not implemented)";

inline ModelFamily FamilyOf(DecoderBlock b) { return b == DecoderBlock::kGpt2 ? ModelFamily::kGpt2 : ModelFamily::kLlama; }

}  // namespace elastrain
