// Tokenizers: text <-> token ids. A byte tokenizer (no files), a sentencepiece model
// (Llama 2), GPT-2's byte-level BPE (vocab.json + merges.txt) and tiktoken's BPE (Llama 3's
// tokenizer.model); LoadTokenizer picks one from `tokenizer_path` and `tokenizer_type`
// (docs/data.md). All are immutable after construction, so every const method is safe to
// call from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/tokenizer_type.h"

namespace elastrain {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual Result<std::vector<int32_t>> Encode(const std::string& text) const = 0;
  virtual std::string Decode(const std::vector<int32_t>& ids) const = 0;
  // Every id Encode returns is in [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
  // Identifies the exact vocabulary, for cache keys: "bytes", "spm:<xxhash of model>",
  // "gpt2bpe:<xxhash of vocab.json and merges.txt>" or "tiktoken:<xxhash of the file>".
  virtual std::string id() const = 0;
  // The id of a special token by its text ("<|endoftext|>", "<|begin_of_text|>"), for
  // callers that insert one; nullopt when the vocabulary has no such special. Encode never
  // produces a special from text: "<|endoftext|>" in a document is ordinary text.
  virtual std::optional<int32_t> SpecialToken(std::string_view name) const { return std::nullopt; }
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

// GPT-2's byte-level BPE, from the vocab.json and merges.txt of Hugging Face's gpt2 (or any
// model of that family): bytes are mapped to GPT-2's 256 printable characters, text is cut
// by GPT-2's pattern (data/pretokenize.h), and each piece is merged by the rank of its
// adjacent pairs in merges.txt (lowest first, leftmost on ties). A vocab.json token made
// of characters outside that alphabet (an added token) and "<|endoftext|>" are specials.
// Decode is exact for every id sequence Encode returns, for any input bytes.
class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<Gpt2BpeTokenizer>> Load(const std::string& vocab_path, const std::string& merges_path);
  // From the files' contents; the names are what errors say (tests, the fuzzer).
  static Result<std::unique_ptr<Gpt2BpeTokenizer>> FromText(std::string_view vocab_json, std::string_view merges_txt,
                                                            const std::string& vocab_name,
                                                            const std::string& merges_name);
  ~Gpt2BpeTokenizer() override;

  Result<std::vector<int32_t>> Encode(const std::string& text) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override;
  std::string id() const override { return id_; }
  std::optional<int32_t> SpecialToken(std::string_view name) const override;

  struct Impl;

 private:
  Gpt2BpeTokenizer(std::unique_ptr<Impl> impl, std::string id);
  std::unique_ptr<Impl> impl_;
  std::string id_;
};

// tiktoken's BPE file (Llama 3's tokenizer.model): one "base64(token bytes) rank" per line,
// ranks 0..N-1 each once, every single byte among the tokens. Text is cut by Llama 3's
// pattern; a piece that is a token is that token, otherwise its bytes are merged by
// tiktoken's rule (repeatedly the adjacent pair whose concatenation has the lowest rank,
// leftmost on ties). Ids are ranks; Meta's 256 special tokens follow the last rank (128000
// <|begin_of_text|> .. 128255 for Llama 3), named as Meta's tokenizer.py names them.
class TiktokenTokenizer final : public Tokenizer {
 public:
  static constexpr int kNumSpecialTokens = 256;
  static Result<std::unique_ptr<TiktokenTokenizer>> Load(const std::string& path);
  static Result<std::unique_ptr<TiktokenTokenizer>> FromText(std::string_view text, const std::string& name);
  ~TiktokenTokenizer() override;

  Result<std::vector<int32_t>> Encode(const std::string& text) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override;
  std::string id() const override { return id_; }
  std::optional<int32_t> SpecialToken(std::string_view name) const override;

  struct Impl;

 private:
  TiktokenTokenizer(std::unique_ptr<Impl> impl, std::string id);
  std::unique_ptr<Impl> impl_;
  std::string id_;
};

// The tokenizer at `path`, of `type` (the tokenizer_type config key). Type unset: chosen
// from the path: empty -> bytes; a directory, or a file named *.json, -> huggingface
// (vocab.json and merges.txt in that directory); a file whose first line is
// "base64 rank" -> tiktoken; any other file -> sentencepiece. An empty path is bytes for
// type bytes or sentencepiece (MaxText's default type with no path) and an error for the
// others; bytes with a path is an error.
Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path,
                                                 std::optional<TokenizerType> type = std::nullopt);

// Trains a deterministic sentencepiece BPE model (character_coverage 1.0, byte fallback,
// identity normalisation, whitespace kept) on the lines of `input_files`; a directory is
// expanded with ListCorpusFiles. Writes `output_model_path` atomically and a
// human-readable "<piece>\t<score>" listing beside it (".model" -> ".vocab").
// vocab_size must leave room for the 256 byte pieces, 3 specials and every character.
Status TrainSentencePiece(const std::vector<std::string>& input_files, int64_t vocab_size,
                          const std::string& output_model_path);

}  // namespace elastrain
