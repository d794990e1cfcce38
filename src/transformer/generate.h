// Text generation from a Transformer: the choice of the next token from logits
// (greedy, temperature, top-k, top-p) and the prompt -> tokens loop over Decode, with
// or without the KV cache. Pure computation on one sequence; no I/O, no tokenizer (the
// caller encodes and decodes). Deterministic: the same seed, options and model give the
// same tokens on every run and thread count (the kernels are; the draw uses its own
// arithmetic on mt19937_64 bits, not the standard library's distributions).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/status.h"
#include "transformer/transformer.h"

namespace elastrain {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (argmax; the lowest id wins a tie); > 0 divides the logits
  int64_t top_k = 0;         // > 0: only the k most likely ids are drawn from
  double top_p = 1.0;        // < 1: only the smallest set of most likely ids whose probability
                             // reaches top_p (nucleus sampling), after top_k
  int64_t vocab_limit = 0;   // > 0: only ids below it are ever chosen (a tokenizer smaller
                             // than the model's vocabulary cannot decode the others)
};
// InvalidArgument naming the option (as the CLI spells it) for a negative temperature or
// top_k, a top_p outside (0, 1], or a negative vocab_limit.
Status ValidateSampling(const SamplingOptions& o);

// The next token from logits (V): greedy, or a draw with `rng`. `scratch` is reused
// between calls. Ids at or above vocab_limit are never chosen.
int32_t SampleToken(const float* logits, int64_t V, const SamplingOptions& o, uint64_t* rng_state,
                    std::vector<std::pair<float, int32_t>>* scratch);

struct GenerateOptions {
  int64_t max_new_tokens = 64;
  SamplingOptions sampling;
  uint64_t seed = 0;
  bool kv_cache = true;  // false: every token runs a full forward over the whole prefix (the check)
  int32_t stop_token = -1;  // >= 0: stop after generating it (e.g. an end-of-sequence id)
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // the new tokens, without the prompt
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0;   // the prompt's forward pass (it yields the first new token)
  double decode_seconds = 0;    // every later token's
  double PrefillTokensPerSecond() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0; }
  double DecodeTokensPerSecond() const {
    const double n = tokens.size() > 1 ? static_cast<double>(tokens.size() - 1) : 0;
    return decode_seconds > 0 ? n / decode_seconds : 0;
  }
};

// Continues `prompt`. The model must be built for one row (max_batch >= 1) with seq_len
// the context; prompt.size() + max_new_tokens - 1 positions must fit in it (the last new
// token is never fed back), else InvalidArgument saying how many fit. An empty prompt, an
// id outside the model's vocabulary, or max_new_tokens < 1 are InvalidArgument too.
// `on_token` (may be empty) sees each new token as it is chosen (streaming output).
Result<GenerateResult> Generate(Transformer<float>& model, const float* params, const std::vector<int32_t>& prompt,
                                const GenerateOptions& o, const std::function<void(int32_t)>& on_token = {});

}  // namespace elastrain
