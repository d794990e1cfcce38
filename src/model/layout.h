// Parameter layout: every parameter of a model lives in one flat fp32 buffer; this is the
// table of named views into it (llm.c style). Gradients and both AdamW moments use the
// same layout, so one offset addresses a tensor in all four buffers.
// Order is layer-major (embeddings, layer 0 ... layer L-1, final norm, head) so that a
// layer's parameters are one contiguous range (what FSDP gathers per layer).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace elastrain {

enum class ParamInit {
  kNormal,          // N(0, 0.02)
  kNormalResidual,  // N(0, 0.02/sqrt(2L)): projections that write into the residual stream
  kOnes,            // norm gains
  kZeros,           // biases
};

struct ParamTensor {
  std::string name;            // e.g. "layers.3.attn.wq"
  std::vector<int64_t> shape;  // row-major global shape, e.g. {Hq*hd, C}
  int64_t offset = 0;          // in floats from the start of the flat buffer
  int64_t size = 0;            // product of shape
  ParamInit init = ParamInit::kNormal;
};

// Offsets (in floats) of one layer's tensors; -1 when the family has no such tensor.
// wq, wk, wv are adjacent so that one GEMM with a ((Hq+2Hkv)*hd, C) weight computes q, k
// and v together; likewise bq, bk, bv, and w_gate, w_up ((2F, C) for SwiGLU).
struct LayerOffsets {
  int64_t attn_norm_w = -1, attn_norm_b = -1;  // -1 without pre-norms (olmo3)
  int64_t wq = -1, wk = -1, wv = -1, bq = -1, bk = -1, bv = -1;  // llama: biases with attention_bias
  int64_t q_norm = -1, k_norm = -1;           // (hd) scales of the QK norm (qk_norm); (Hq*hd), (Hkv*hd) global
  int64_t wo = -1, bo = -1;
  int64_t post_attn_norm = -1;                // (C) norm of the attention output (post_attn_norm)
  int64_t mlp_norm_w = -1, mlp_norm_b = -1;
  int64_t w_gate = -1, w_up = -1, b_up = -1;  // llama: gate+up; gpt2: w_up is the fc (F,C), b_up its bias
  int64_t w_down = -1, b_down = -1;           // (C, F)
  int64_t post_ffw_norm = -1;                 // (C) norm of the MLP output (post_ffw_norm)
  int64_t begin = 0, end = 0;                 // the layer's contiguous range
};

struct ParamLayout {
  std::vector<ParamTensor> tensors;
  int64_t total = 0;
  int64_t wte = -1;            // (V, C) token embedding (also the output head when tied)
  int64_t wpe = -1;            // (T, C) learned positions (gpt2)
  int64_t final_norm_w = -1, final_norm_b = -1;
  int64_t lm_head = -1;        // (V, C) untied output head; == wte when tie_embeddings (gpt2 always)
  std::vector<LayerOffsets> layers;
  const ParamTensor* Find(const std::string& name) const;
};

// The layout of a valid model (ModelConfig::Validate), whose sizes cannot overflow.
ParamLayout BuildParamLayout(const ModelConfig& m);
// The same with every size and offset overflow-checked: InvalidArgument naming the
// tensor for shapes whose sizes overflow int64, or more layers than kMaxLayers.
Result<ParamLayout> BuildParamLayoutChecked(const ModelConfig& m);

}  // namespace elastrain
