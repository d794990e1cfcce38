// Tokenizers: text <-> token ids. A byte tokenizer (no files) and a sentencepiece BPE
// model; LoadTokenizer picks one from `tokenizer_path`. Both are immutable after
// construction, so every const method is safe to call from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace elastrain {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual Result<std::vector<int32_t>> Encode(const std::string& text) const = 0;
  virtual std::string Decode(const std::vector<int32_t>& ids) const = 0;
  // Every id Encode returns is in [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
  // Identifies the exact vocabulary, for cache keys: "bytes" or "spm:<xxhash of model>".
  virtual std::string id() const = 0;
};

// Ids 0..255 are the bytes of the text; lossless for any input.
class ByteTokenizer final : public Tokenizer {
 public:
  Result<std::vector<int32_t>> Encode(const std::string& text) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return 256; }
  std::string id() const override { return "bytes"; }
};

// A sentencepiece .model file. Models trained by TrainSentencePiece round-trip any
// valid UTF-8 text exactly (identity normalisation, byte fallback); malformed UTF-8 is
// replaced by U+FFFD by sentencepiece itself.
class SentencePieceTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<SentencePieceTokenizer>> Load(const std::string& model_path);
  ~SentencePieceTokenizer() override;

  Result<std::vector<int32_t>> Encode(const std::string& text) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override;
  std::string id() const override { return id_; }

 private:
  struct Impl;
  explicit SentencePieceTokenizer(std::unique_ptr<Impl> impl, std::string path, std::string id);
  std::unique_ptr<Impl> impl_;
  std::string path_;
  std::string id_;
};

// Empty path: ByteTokenizer; otherwise the sentencepiece model at `path`.
Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

// Trains a deterministic sentencepiece BPE model (character_coverage 1.0, byte fallback,
// identity normalisation, whitespace kept) on the lines of `input_files`; a directory is
// expanded with ListCorpusFiles. Writes `output_model_path` atomically and a
// human-readable "<piece>\t<score>" listing beside it (".model" -> ".vocab").
// vocab_size must leave room for the 256 byte pieces, 3 specials and every character.
Status TrainSentencePiece(const std::vector<std::string>& input_files, int64_t vocab_size,
                          const std::string& output_model_path);

}  // namespace elastrain
