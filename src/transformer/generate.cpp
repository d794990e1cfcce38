#include "transformer/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/clock.h"

namespace elastrain {

namespace {

// splitmix64: one 64-bit state, the same numbers everywhere.
uint64_t NextRandom(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
// Uniform in [0, 1) with 53 random bits.
double Uniform(uint64_t* s) { return static_cast<double>(NextRandom(s) >> 11) * (1.0 / 9007199254740992.0); }

}  // namespace

Status ValidateSampling(const SamplingOptions& o) {
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    return Status::InvalidArgument(fmt::format("--temperature={}: expected a number >= 0 (0: greedy)", o.temperature));
  if (o.top_k < 0) return Status::InvalidArgument(fmt::format("--top-k={}: expected >= 0 (0: no limit)", o.top_k));
  if (!(o.top_p > 0 && o.top_p <= 1))
    return Status::InvalidArgument(fmt::format("--top-p={}: expected a probability in (0, 1] (1: no limit)", o.top_p));
  if (o.vocab_limit < 0) return Status::InvalidArgument(fmt::format("vocab_limit={}: expected >= 0", o.vocab_limit));
  return Status::OK();
}

int32_t SampleToken(const float* logits, int64_t V, const SamplingOptions& o, uint64_t* rng,
                    std::vector<std::pair<float, int32_t>>* scratch) {
  const int64_t n = o.vocab_limit > 0 ? std::min(V, o.vocab_limit) : V;
  if (o.temperature == 0) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i)
      if (logits[i] > logits[best]) best = i;
    return static_cast<int32_t>(best);
  }
  // Candidates by decreasing logit (ties: lower id first), cut to top_k, as
  // probabilities at the temperature, cut to the nucleus, then one draw.
  auto& c = *scratch;
  c.clear();
  for (int64_t i = 0; i < n; ++i) c.emplace_back(logits[i], static_cast<int32_t>(i));
  auto before = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  const int64_t k = o.top_k > 0 ? std::min<int64_t>(o.top_k, n) : n;
  std::partial_sort(c.begin(), c.begin() + k, c.end(), before);
  c.resize(k);
  const double top = c[0].first;
  std::vector<double> p(k);
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) sum += p[i] = std::exp((c[i].first - top) / o.temperature);
  int64_t keep = k;
  if (o.top_p < 1) {
    double cum = 0;
    for (int64_t i = 0; i < k; ++i) {
      cum += p[i] / sum;
      if (cum >= o.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (int64_t i = 0; i < keep; ++i) kept += p[i];
  double u = Uniform(rng) * kept;
  for (int64_t i = 0; i < keep; ++i) {
    u -= p[i];
    if (u < 0) return c[i].second;
  }
  return c[keep - 1].second;  // rounding left u at the very end
}

Result<GenerateResult> Generate(Transformer<float>& model, const float* params, const std::vector<int32_t>& prompt,
                                const GenerateOptions& o, const std::function<void(int32_t)>& on_token) {
  ELASTRAIN_RETURN_IF_ERROR(ValidateSampling(o.sampling));
  const int64_t P = static_cast<int64_t>(prompt.size()), ctx = model.seq_len();
  const int64_t V = model.config().vocab_size;
  if (P == 0) return Status::InvalidArgument("the prompt is empty (no tokens): give some text to continue");
  if (o.max_new_tokens < 1)
    return Status::InvalidArgument(fmt::format("--max-new-tokens={}: expected at least 1", o.max_new_tokens));
  for (int64_t i = 0; i < P; ++i)
    if (prompt[i] < 0 || prompt[i] >= V)
      return Status::InvalidArgument(fmt::format(
          "prompt token {} has id {}, outside the model's vocabulary [0, {}) (vocab_size): the tokenizer does not "
          "match the model", i, prompt[i], V));
  if (P > ctx || o.max_new_tokens - 1 > ctx - P)
    return Status::InvalidArgument(fmt::format(
        "the prompt ({} tokens) and --max-new-tokens={} need {} positions, but the model's context is {} "
        "(max_target_length; nothing slides): ask for at most {} new tokens{}", P, o.max_new_tokens,
        P + o.max_new_tokens - 1, ctx, std::max<int64_t>(0, ctx - P + 1),
        P > ctx ? " after shortening the prompt" : ""));
  GenerateResult r;
  r.prompt_tokens = P;
  KvCache<float> cache;
  if (o.kv_cache) cache = model.NewKvCache();
  std::vector<int32_t> seq = prompt;
  std::vector<float> logits(V);
  std::vector<std::pair<float, int32_t>> scratch;
  uint64_t rng = o.seed;
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    // With the cache: the prompt, then only the newest token. Without: the whole prefix.
    const int64_t begin = o.kv_cache ? (i == 0 ? 0 : static_cast<int64_t>(seq.size()) - 1) : 0;
    ELASTRAIN_RETURN_IF_ERROR(model.Decode(params, seq.data() + begin, static_cast<int64_t>(seq.size()) - begin,
                                           o.kv_cache ? &cache : nullptr, logits.data()));
    const int32_t next = SampleToken(logits.data(), V, o.sampling, &rng, &scratch);
    (i == 0 ? r.prefill_seconds : r.decode_seconds) += SecondsSince(t0);
    r.tokens.push_back(next);
    seq.push_back(next);
    if (on_token) on_token(next);
    if (next == o.stop_token) break;
  }
  return r;
}

}  // namespace elastrain
