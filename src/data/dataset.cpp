#include "data/dataset.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/files.h"
#include "common/log.h"
#include "data/corpus.h"
#include "data/token_cache.h"
#include "data/tokenizer.h"

namespace elastrain {

namespace {

const char* SplitName(Split s) { return s == Split::kTrain ? "train" : "eval"; }

[[noreturn]] void IndexOutOfRange(Split split, int64_t index, int64_t n) {
  LOG_ERROR("Dataset::GetSample: {} index {} out of range [0, {})", SplitName(split), index, n);
  std::abort();
}

// ---------------------------------------------------------------- synthetic

class SyntheticDataset final : public Dataset {
 public:
  SyntheticDataset(int64_t seq_len, int64_t vocab_size, uint64_t seed)
      : seq_len_(seq_len), vocab_size_(vocab_size), seed_(seed) {}

  int64_t num_samples(Split split) const override {
    return split == Split::kTrain ? kSyntheticTrainSamples : kSyntheticEvalSamples;
  }
  int64_t seq_len() const override { return seq_len_; }

  // out (T+1): out[t] = (start + t * step) mod V.
  void GetSample(Split split, int64_t index, int32_t* out) const override {
    const int64_t n = num_samples(split);
    if (index < 0 || index >= n) IndexOutOfRange(split, index, n);
    // Eval samples come from a different stream of the same seed.
    const uint64_t tag = split == Split::kTrain ? 0x747261696eULL : 0x6576616cULL;
    const uint64_t h = SplitMix64(SplitMix64(seed_ ^ SplitMix64(tag)) ^ static_cast<uint64_t>(index));
    const uint64_t v = static_cast<uint64_t>(vocab_size_);
    const uint64_t max_step = std::min<uint64_t>(kMaxStep, v - 1);
    const uint64_t start = h % v;
    const uint64_t step = max_step == 0 ? 0 : 1 + (h >> 32) % max_step;
    for (int64_t t = 0; t <= seq_len_; ++t)
      out[t] = static_cast<int32_t>((start + static_cast<uint64_t>(t) * step) % v);
  }

  std::string Describe() const override {
    return "synthetic dataset: " + std::to_string(kSyntheticTrainSamples) + " train / " +
           std::to_string(kSyntheticEvalSamples) + " eval sequences of " + std::to_string(seq_len_ + 1) +
           " tokens, arithmetic progressions mod " + std::to_string(vocab_size_) + ", seed " +
           std::to_string(seed_);
  }

 private:
  static constexpr uint64_t kMaxStep = 8;
  int64_t seq_len_, vocab_size_;
  uint64_t seed_;
};

// ---------------------------------------------------------------- text

class TextDataset final : public Dataset {
 public:
  TextDataset(std::vector<int32_t> tokens, int64_t seq_len, int64_t train_windows, int64_t eval_windows,
              std::string source)
      : tokens_(std::move(tokens)),
        seq_len_(seq_len),
        train_windows_(train_windows),
        eval_windows_(eval_windows),
        source_(std::move(source)) {}

  int64_t num_samples(Split split) const override {
    return split == Split::kTrain ? train_windows_ : eval_windows_;
  }
  int64_t seq_len() const override { return seq_len_; }

  void GetSample(Split split, int64_t index, int32_t* out) const override {
    const int64_t n = num_samples(split);
    if (index < 0 || index >= n) IndexOutOfRange(split, index, n);
    const int64_t window = split == Split::kTrain ? index : train_windows_ + index;
    std::memcpy(out, tokens_.data() + window * seq_len_, sizeof(int32_t) * static_cast<size_t>(seq_len_ + 1));
  }

  std::string Describe() const override {
    return "text dataset " + source_ + ": " + std::to_string(tokens_.size()) + " tokens, " +
           std::to_string(train_windows_) + " train / " + std::to_string(eval_windows_) + " eval windows of " +
           std::to_string(seq_len_ + 1) + " tokens";
  }

 private:
  std::vector<int32_t> tokens_;
  int64_t seq_len_, train_windows_, eval_windows_;
  std::string source_;
};

int64_t EvalWindows(int64_t windows, double fraction) {
  if (fraction <= 0) return 0;
  return std::max<int64_t>(1, std::llround(static_cast<double>(windows) * fraction));
}

bool SplitFits(int64_t windows, double fraction) {
  const int64_t eval = EvalWindows(windows, fraction);
  return windows - eval >= 1 && (fraction <= 0 || eval >= 1);
}

Result<std::unique_ptr<Dataset>> OpenTextDataset(const DatasetOptions& o) {
  if (o.path.empty())
    return Status::InvalidArgument("dataset_path is empty: dataset_type=text needs a text file or a directory");
  ELASTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, LoadTokenizer(o.tokenizer_path));
  if (tokenizer->vocab_size() > o.vocab_size)
    return Status::InvalidArgument(
        "tokenizer_path=" + (o.tokenizer_path.empty() ? std::string("(bytes)") : o.tokenizer_path) +
        ": vocabulary of " + std::to_string(tokenizer->vocab_size()) + " tokens does not fit vocab_size=" +
        std::to_string(o.vocab_size) + " (raise vocab_size or train a smaller tokenizer)");
  ELASTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> files, ListCorpusFiles(o.path));
  ELASTRAIN_ASSIGN_OR_RETURN(TokenStream stream, LoadOrBuildTokens(*tokenizer, files, o.cache_dir));

  const int64_t n = static_cast<int64_t>(stream.tokens.size());
  const int64_t T = o.seq_len;
  const int64_t windows = n > T ? (n - 1) / T : 0;  // window w covers tokens [w*T, w*T + T]
  if (!SplitFits(windows, o.eval_split_fraction)) {
    int64_t need = 1;
    while (!SplitFits(need, o.eval_split_fraction) && need < (int64_t{1} << 40)) ++need;
    return Status::InvalidArgument(
        "dataset_path=" + o.path + ": corpus has " + std::to_string(n) + " tokens (" + std::to_string(windows) +
        " windows of " + std::to_string(T + 1) + "); at least one train and one eval window need " +
        std::to_string(need * T + 1) + " tokens with max_target_length=" + std::to_string(T) +
        " and eval_split_fraction=" + std::to_string(o.eval_split_fraction) +
        " (use a larger corpus or a shorter max_target_length)");
  }
  const int64_t eval = EvalWindows(windows, o.eval_split_fraction);
  std::string source = o.path + " (" + std::to_string(files.size()) + " files, tokenizer " + tokenizer->id() + ")";
  return std::unique_ptr<Dataset>(
      std::make_unique<TextDataset>(std::move(stream.tokens), T, windows - eval, eval, std::move(source)));
}

}  // namespace

Result<std::unique_ptr<Dataset>> OpenDataset(const DatasetOptions& o) {
  if (o.seq_len < 1)
    return Status::InvalidArgument("max_target_length=" + std::to_string(o.seq_len) + ": expected a positive integer");
  if (o.vocab_size < 1 || o.vocab_size > (int64_t{1} << 31) - 1)
    return Status::InvalidArgument("vocab_size=" + std::to_string(o.vocab_size) + ": expected 1 .. 2^31-1");
  if (!(o.eval_split_fraction >= 0 && o.eval_split_fraction < 1))
    return Status::InvalidArgument("eval_split_fraction=" + std::to_string(o.eval_split_fraction) +
                                   ": expected a number in [0, 1)");
  std::unique_ptr<Dataset> ds;
  switch (o.type) {
    case DatasetType::kSynthetic:
      ds = std::make_unique<SyntheticDataset>(o.seq_len, o.vocab_size, o.seed);
      break;
    case DatasetType::kText:
      ELASTRAIN_ASSIGN_OR_RETURN(ds, OpenTextDataset(o));
      break;
  }
  LOG_INFO("{}", ds->Describe());
  return ds;
}

}  // namespace elastrain
