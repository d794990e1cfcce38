#include "data/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/dataset_path.h"
#include "common/files.h"
#include "common/log.h"
#include "data/blend.h"
#include "data/corpus.h"
#include "data/jsonl.h"
#include "data/prepared_manifest.h"
#include "data/token_cache.h"
#include "data/token_files.h"
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

// ---------------------------------------------------------------- windows of a token stream

// Windows of T+1 tokens with stride T over one stream of tokens: the first train_windows
// are the train split, the next eval_windows the eval split (text, jsonl, token files).
class WindowedDataset : public Dataset {
 public:
  WindowedDataset(int64_t seq_len, int64_t train_windows, int64_t eval_windows)
      : seq_len_(seq_len), train_windows_(train_windows), eval_windows_(eval_windows) {}
  int64_t num_samples(Split split) const override {
    return split == Split::kTrain ? train_windows_ : eval_windows_;
  }
  int64_t seq_len() const override { return seq_len_; }

 protected:
  // The stream position of sample `index`'s first token; an index out of range aborts.
  int64_t WindowStart(Split split, int64_t index) const {
    const int64_t n = num_samples(split);
    if (index < 0 || index >= n) IndexOutOfRange(split, index, n);
    return (split == Split::kTrain ? index : train_windows_ + index) * seq_len_;
  }
  std::string WindowsText() const {
    return std::to_string(train_windows_) + " train / " + std::to_string(eval_windows_) + " eval windows of " +
           std::to_string(seq_len_ + 1) + " tokens";
  }
  const int64_t seq_len_, train_windows_, eval_windows_;
};

// ---------------------------------------------------------------- text

class TextDataset final : public WindowedDataset {
 public:
  TextDataset(std::string kind, std::vector<int32_t> tokens, int64_t seq_len, int64_t train_windows,
              int64_t eval_windows, std::string source)
      : WindowedDataset(seq_len, train_windows, eval_windows),
        kind_(std::move(kind)),
        tokens_(std::move(tokens)),
        source_(std::move(source)) {}

  void GetSample(Split split, int64_t index, int32_t* out) const override {
    std::memcpy(out, tokens_.data() + WindowStart(split, index), sizeof(int32_t) * static_cast<size_t>(seq_len_ + 1));
  }

  std::string Describe() const override {
    return kind_ + " dataset " + source_ + ": " + std::to_string(tokens_.size()) + " tokens, " + WindowsText();
  }

 private:
  std::string kind_;
  std::vector<int32_t> tokens_;
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

// The train/eval windows of a stream of n tokens, or an error naming what it needs.
Result<std::pair<int64_t, int64_t>> SplitWindows(const DatasetOptions& o, const std::string& path, int64_t n) {
  const int64_t T = o.seq_len;
  const int64_t windows = n > T ? (n - 1) / T : 0;  // window w covers tokens [w*T, w*T + T]
  if (!SplitFits(windows, o.eval_split_fraction)) {
    int64_t need = 1;
    while (!SplitFits(need, o.eval_split_fraction) && need < (int64_t{1} << 40)) ++need;
    return Status::InvalidArgument(
        "dataset_path=" + path + ": corpus has " + std::to_string(n) + " tokens (" + std::to_string(windows) +
        " windows of " + std::to_string(T + 1) + "); at least one train and one eval window need " +
        std::to_string(need * T + 1) + " tokens with max_target_length=" + std::to_string(T) +
        " and eval_split_fraction=" + std::to_string(o.eval_split_fraction) +
        " (use a larger corpus or a shorter max_target_length)");
  }
  const int64_t eval = EvalWindows(windows, o.eval_split_fraction);
  return std::make_pair(windows - eval, eval);
}

Result<std::unique_ptr<Dataset>> OpenTextDataset(const DatasetOptions& o) {
  const bool jsonl = o.type == DatasetType::kJsonl;
  if (o.path.empty())
    return Status::InvalidArgument(std::string("dataset_path is empty: dataset_type=") +
                                   (jsonl ? "jsonl needs a .jsonl file or a directory"
                                          : "text needs a text file or a directory"));
  ELASTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, LoadTokenizer(o.tokenizer_path, o.tokenizer_type));
  if (tokenizer->vocab_size() > o.vocab_size)
    return Status::InvalidArgument(
        "tokenizer_path=" + (o.tokenizer_path.empty() ? std::string("(bytes)") : o.tokenizer_path) +
        ": vocabulary of " + std::to_string(tokenizer->vocab_size()) + " tokens does not fit vocab_size=" +
        std::to_string(o.vocab_size) + " (raise vocab_size or train a smaller tokenizer)");
  std::vector<std::string> files;
  TextExtractor extractor;
  if (jsonl) {
    ELASTRAIN_ASSIGN_OR_RETURN(files, ListDataFiles(o.path, ".jsonl", "JSONL files"));
    extractor.id = "jsonl:" + o.text_field;
    extractor.extract = [field = o.text_field](const std::string& path, const std::string& content) {
      return JsonlDocumentsText(path, content, field);
    };
  } else {
    ELASTRAIN_ASSIGN_OR_RETURN(files, ListCorpusFiles(o.path));
  }
  ELASTRAIN_ASSIGN_OR_RETURN(TokenStream stream,
                             LoadOrBuildTokens(*tokenizer, files, o.cache_dir, jsonl ? &extractor : nullptr));
  ELASTRAIN_ASSIGN_OR_RETURN(auto split, SplitWindows(o, o.path, static_cast<int64_t>(stream.tokens.size())));
  std::string source = o.path + " (" + std::to_string(files.size()) + " files, " +
                       (jsonl ? "field \"" + o.text_field + "\", " : std::string()) + "tokenizer " + tokenizer->id() +
                       ")";
  return std::unique_ptr<Dataset>(std::make_unique<TextDataset>(jsonl ? "jsonl" : "text", std::move(stream.tokens),
                                                                o.seq_len, split.first, split.second,
                                                                std::move(source)));
}

// ---------------------------------------------------------------- token files

// llmc, nanogpt, megatron: the mapped files' tokens as one stream (file order).
class TokenFileDataset final : public WindowedDataset {
 public:
  TokenFileDataset(std::vector<TokenFile> files, int64_t seq_len, int64_t vocab_size, int64_t train_windows,
                   int64_t eval_windows, std::string source)
      : WindowedDataset(seq_len, train_windows, eval_windows),
        files_(std::move(files)),
        vocab_size_(vocab_size),
        source_(std::move(source)) {
    starts_.push_back(0);
    for (const TokenFile& f : files_) starts_.push_back(starts_.back() + f.tokens.count);
  }

  void GetSample(Split split, int64_t index, int32_t* out) const override {
    const int32_t* start = out;
    int64_t pos = WindowStart(split, index), left = seq_len_ + 1;
    // The file holding token `pos`: the last start <= pos (empty files are skipped).
    size_t f = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), pos) - starts_.begin()) - 1;
    while (left > 0) {
      const int64_t first = pos - starts_[f];
      const int64_t take = std::min(left, files_[f].tokens.count - first);
      if (take > 0) {
        files_[f].tokens.Copy(first, take, out);
        out += take;
        pos += take;
        left -= take;
      }
      ++f;
    }
    // The ids were checked at open, but a mapped file that someone rewrites in place
    // shows the new bytes: an id out of the vocabulary must never reach the embedding.
    for (int64_t t = 0; t <= seq_len_; ++t)
      if (start[t] < 0 || start[t] >= vocab_size_) {
        LOG_ERROR("{}: {} sample {} holds token id {}, not below vocab_size={}: a token file changed after it was "
                  "checked at open (files must not change while a run reads them)",
                  source_, SplitName(split), index, start[t], vocab_size_);
        std::abort();
      }
  }

  std::string Describe() const override {
    return source_ + ": " + std::to_string(starts_.back()) + " tokens in " + std::to_string(files_.size()) +
           " files (" + files_.front().format + (files_.size() > 1 ? ", ..." : "") + "), " + WindowsText();
  }

 private:
  std::vector<TokenFile> files_;
  std::vector<int64_t> starts_;  // [files + 1]: the stream position of each file's first token
  int64_t vocab_size_;
  std::string source_;
};

Result<std::unique_ptr<Dataset>> OpenTokenFileDataset(const DatasetOptions& o) {
  ELASTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> names, ListTokenFiles(o.type, o.path));
  std::vector<TokenFile> files;
  int64_t n = 0;
  for (const std::string& name : names) {
    ELASTRAIN_ASSIGN_OR_RETURN(TokenFile f, OpenTokenFile(o.type, name, o.vocab_size));
    n += f.tokens.count;
    files.push_back(std::move(f));
  }
  if (o.type == DatasetType::kLlmc) {
    // Files `data prepare` wrote are checked against their manifest.json, and against the
    // job's tokenizer when one is set.
    std::vector<TokenFileCount> counts;
    for (const TokenFile& f : files) counts.push_back({f.path, f.tokens.count});
    std::string tokenizer_id;
    if (!o.tokenizer_path.empty() || o.tokenizer_type) {
      ELASTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, LoadTokenizer(o.tokenizer_path, o.tokenizer_type));
      tokenizer_id = tok->id();
    }
    std::vector<std::string> notes;
    ELASTRAIN_RETURN_IF_ERROR(CheckPreparedTokenFiles(counts, tokenizer_id, &notes));
    for (const std::string& note : notes) LOG_INFO("dataset: {}", note);
  }
  ELASTRAIN_ASSIGN_OR_RETURN(auto split, SplitWindows(o, o.path, n));
  std::string source = std::string(DatasetTypeName(o.type)) + " dataset " + o.path;
  return std::unique_ptr<Dataset>(
      std::make_unique<TokenFileDataset>(std::move(files), o.seq_len, o.vocab_size, split.first, split.second,
                                         std::move(source)));
}

Result<std::unique_ptr<Dataset>> OpenOneSource(const DatasetOptions& o) {
  switch (o.type) {
    case DatasetType::kSynthetic:
      return std::unique_ptr<Dataset>(std::make_unique<SyntheticDataset>(o.seq_len, o.vocab_size, o.seed));
    case DatasetType::kText:
    case DatasetType::kJsonl:
      return OpenTextDataset(o);
    case DatasetType::kLlmc:
    case DatasetType::kNanoGpt:
    case DatasetType::kMegatron:
      return OpenTokenFileDataset(o);
  }
  return Status::Internal("unknown dataset type");
}

Result<std::unique_ptr<Dataset>> OpenBlend(const DatasetOptions& o, const std::vector<WeightedPath>& parts) {
  if (o.type == DatasetType::kSynthetic)
    return Status::InvalidArgument("dataset_path=\"" + o.path + "\": a blend needs files; dataset_type=synthetic " +
                                   "reads none");
  if (parts.size() > 65535)
    return Status::InvalidArgument("dataset_path: a blend of " + std::to_string(parts.size()) +
                                   " sources, at most 65535");
  std::vector<std::unique_ptr<Dataset>> sources;
  std::vector<double> weights;
  std::vector<std::string> names;
  for (const WeightedPath& p : parts) {
    DatasetOptions one = o;
    one.path = p.path;
    auto ds = OpenOneSource(one);
    if (!ds.ok()) return ds.status();  // its message names the file
    LOG_INFO("blend source: {}", (*ds)->Describe());
    sources.push_back(std::move(*ds));
    weights.push_back(p.weight);
    names.push_back(p.path);
  }
  return MakeBlendedDataset(std::move(sources), std::move(weights), std::move(names));
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
  if (IsDatasetBlend(o.path)) {
    ELASTRAIN_ASSIGN_OR_RETURN(std::vector<WeightedPath> parts, ParseDatasetPath(o.path));
    ELASTRAIN_ASSIGN_OR_RETURN(ds, OpenBlend(o, parts));
  } else {
    ELASTRAIN_ASSIGN_OR_RETURN(ds, OpenOneSource(o));
  }
  LOG_INFO("{}", ds->Describe());
  return ds;
}

}  // namespace elastrain
