// sample_period (docs/generate.md): a short greedy sample of the model in the log, as
// llm.c prints during training. The chief alone, between steps, with the model it trains
// (Transformer::Decode without a cache reuses its activation buffers, which the next
// step's forward overwrites); nothing it does changes what is trained.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/log.h"
#include "transformer/generate.h"
#include "train/trainer_impl.h"

namespace elastrain {

namespace {
constexpr int64_t kSamplePromptTokens = 8;
constexpr int64_t kSampleNewTokens = 32;

// The length of the valid UTF-8 sequence at s[i] (2..4), or 0.
size_t Utf8Length(const std::string& s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
  if (n == 0 || c > 0xf4 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  return n;
}

// The text for one log line: control characters and bytes that are not UTF-8 escaped
// (\n, \t, \xNN), so that an early model's bytes can neither break the line nor make
// train.log look binary.
std::string Printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else if (c < 0x80) out += static_cast<char>(c);
    else if (size_t n = Utf8Length(s, i); n > 0) out += s.substr(i, n), i += n - 1;
    else out += fmt::format("\\x{:02x}", c);
  }
  return out;
}

}  // namespace

void Trainer::MaybeSample(int64_t done) {
  if (cfg_.sample_period <= 0 || done % cfg_.sample_period != 0 || !is_chief() || sample_off_) return;
  auto off = [&](const std::string& why) {
    LOG_WARN("sample_period={}: no samples in this generation: {}", cfg_.sample_period, why);
    sample_off_ = true;
  };
  if (!holds_replica())
    return off("rank 0 holds a shard of the model (fsdp or tensor > 1), not all of it; "
               "elastrain generate samples any checkpoint");
  const bool text = cfg_.dataset_type == DatasetType::kText;
  if (text && !sample_tokenizer_) {
    auto tok = LoadTokenizer(cfg_.tokenizer_path);
    if (!tok.ok()) return off(tok.status().message());
    sample_tokenizer_ = std::move(tok).value();
  }
  // The prompt: the first tokens of the first eval sample (of the first train sample
  // when there is no eval split), the same at every step.
  const Split split = data_->num_samples(Split::kEval) > 0 ? Split::kEval : Split::kTrain;
  data_->GetSample(split, 0, sample_.data());
  const int64_t P = std::min<int64_t>(kSamplePromptTokens, std::max<int64_t>(1, T_ / 2));
  std::vector<int32_t> prompt(sample_.begin(), sample_.begin() + P);
  GenerateOptions o;
  o.max_new_tokens = std::min<int64_t>(kSampleNewTokens, T_ - P + 1);
  o.sampling.temperature = 0;
  o.kv_cache = false;  // the trainer's model is built for (batch, T); no cache to allocate
  auto r = Generate(*model_, state_->params(), prompt, o);
  if (!r.ok()) return off(r.status().message());
  if (text) {
    LOG_INFO("step {}: sample: {} | {}", done, Printable(sample_tokenizer_->Decode(prompt)),
             Printable(sample_tokenizer_->Decode(r->tokens)));
    return;
  }
  auto join = [](const std::vector<int32_t>& v) {
    std::string s;
    for (int32_t t : v) {
      if (!s.empty()) s += ' ';
      s += std::to_string(t);
    }
    return s;
  };
  LOG_INFO("step {}: sample (token ids): {} | {}", done, join(prompt), join(r->tokens));
}

}  // namespace elastrain
