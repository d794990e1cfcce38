// Hugging Face transformers' layout of the models elastrain trains: config.json to
// elastrain's model keys and back, and which HF tensor holds which elastrain tensor, in
// what form (docs/checkpoint-format.md "Hugging Face layout"). Pure: no file is read here.
//
// Architectures: GPT2LMHeadModel (gpt2), LlamaForCausalLM (llama), MistralForCausalLM
// (mistral), Qwen2ForCausalLM (qwen2), Qwen3ForCausalLM (qwen3). Anything else, or an
// option of these that elastrain does not implement (rope_scaling other than llama3's, an
// o_proj or MLP bias, another activation, ...), is refused naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/decoder_block.h"
#include "model/model_config.h"

namespace elastrain::convert {

// elastrain's model keys (a YAML text `train` loads, model_name=default) for the model a
// config.json describes. `origin` names the file in errors.
Result<std::string> ModelYamlFromHfConfig(const std::string& config_json, const std::string& origin);

// HF's config.json for a model elastrain trained: InvalidArgument naming what has no HF
// form (gemma, gemma2, olmo3, soft caps, z-loss needs no form: it is a training option).
Result<std::string> HfConfigFromModel(const ModelConfig& m, DecoderBlock block);

// How an HF tensor holds elastrain tensors.
enum class HfForm {
  kSame,           // the same values and shape
  kTransposed,     // GPT-2's Conv1D: HF [in, out] is elastrain's [out, in] transposed
  kFusedTransposed,  // GPT-2's c_attn weight [C, 3C]: q, k, v (each [C, C]) transposed, side by side
  kFused,          // GPT-2's c_attn bias [3C]: q, k, v biases one after the other
  kRopeHalves,     // Llama's q/k rows (or a q/k bias or per-head norm): each head's rows in
                   // rotate_half order (all even dims, then all odd) where elastrain pairs them
};

struct HfTensorRule {
  std::string hf;                  // the HF name, e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> hf_shape;   // its shape in the HF file
  std::vector<std::string> ours;   // the elastrain tensor(s): one, or q, k, v of a fused one
  HfForm form = HfForm::kSame;
  int64_t heads = 1;               // kRopeHalves: heads in the rows (1 for a per-head norm)
};

// Every HF tensor of `m`, in HF's order (embeddings, layers, final norm, head). Every
// elastrain tensor of the layout is in exactly one rule; a tied head has no lm_head rule.
// `prefix` is GPT-2's optional "transformer." (a GPT2LMHeadModel's save_pretrained).
std::vector<HfTensorRule> HfTensorRules(const ModelConfig& m, DecoderBlock block, const std::string& prefix = "");

// HF tensors a checkpoint may hold that are no parameters (GPT-2's attention mask
// buffers, rotary inv_freq): skipped on import.
bool IsHfBuffer(const std::string& hf_name);

// elastrain's tensor `part` (index into rule.ours) from the HF tensor's values.
std::vector<float> OursFromHf(const HfTensorRule& rule, size_t part, const std::vector<float>& hf,
                              const std::vector<int64_t>& our_shape);
// The HF tensor's values from elastrain's tensors (rule.ours, in order).
std::vector<float> HfFromOurs(const HfTensorRule& rule, const std::vector<std::vector<float>>& ours,
                              const std::vector<std::vector<int64_t>>& our_shapes);

}  // namespace elastrain::convert
