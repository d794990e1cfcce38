// Datasets: an indexable, immutable sequence of token windows in two splits.
// GetSample is const and thread-safe; a Dataset is shared by all loader threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/dataset_type.h"
#include "common/tokenizer_type.h"
#include "common/status.h"

namespace elastrain {

enum class Split { kTrain, kEval };

struct DatasetOptions {
  DatasetType type = DatasetType::kSynthetic;
  std::string path;                // dataset_path: files, or a blend "W1 PATH1 W2 PATH2 ..."
  std::string tokenizer_path;      // text, jsonl: sentencepiece .model; empty: bytes
  std::optional<TokenizerType> tokenizer_type;  // unset: chosen from tokenizer_path (data/tokenizer.h)
  std::string cache_dir;           // text, jsonl: where token caches live; empty: no cache
  std::string text_field = "text";  // jsonl: the field holding the text (train_data_columns)
  int64_t seq_len = 0;             // T: a sample is T+1 tokens (inputs and shifted targets)
  int64_t vocab_size = 0;          // the model's V; every token id is below it
  double eval_split_fraction = 0.05;  // text: share of the windows held out, in [0, 1)
  uint64_t seed = 0;               // synthetic: the generator's seed
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t num_samples(Split split) const = 0;
  virtual int64_t seq_len() const = 0;
  // Writes the T+1 tokens of sample `index` (0 <= index < num_samples(split)) to `out`:
  // inputs are out[0..T), targets out[1..T]. An index out of range aborts (a caller bug).
  virtual void GetSample(Split split, int64_t index, int32_t* out) const = 0;
  // One line for the log: kind, sizes, source.
  virtual std::string Describe() const = 0;
};

// Validates the options (errors name the key and the value) and opens the dataset.
//  synthetic: no files; 1<<20 train and 1<<12 eval samples, each deterministic from
//    (seed, split, index): an arithmetic progression mod V with a random start and a
//    small random step, so a model can learn it and the loss can drop.
//  text: the corpus is tokenised (through the token cache) and cut into windows of
//    T+1 tokens with stride T; the last eval_split_fraction of the windows (at least
//    one when the fraction is positive) is the eval split, the rest train. The last
//    train target is the first eval input: a single shared token, not a whole window.
//  jsonl: like text, the text being each line's `text_field`, documents in line order,
//    each followed by "\n" (data/jsonl.h); bad lines are an error naming file:line.
//  llmc, nanogpt, megatron: the files' tokens, memory-mapped (data/token_files.h), every
//    id checked against vocab_size at open; the files in sorted order are one stream,
//    cut into windows as for text. Windows cross file, document and sequence boundaries
//    (as Megatron's GPT dataset concatenates documents; llm.c's documents start with
//    their EOT token, so the model sees where one ends).
//  A blend (dataset_path "W1 PATH1 W2 PATH2 ..."): each PATH opened as above, then
//    blended by weight (data/blend.h); each split blends the sources' same split.
Result<std::unique_ptr<Dataset>> OpenDataset(const DatasetOptions& options);

inline constexpr int64_t kSyntheticTrainSamples = int64_t{1} << 20;
inline constexpr int64_t kSyntheticEvalSamples = int64_t{1} << 12;

}  // namespace elastrain
