// Pre-tokenization for the byte-level BPE tokenizers (bpe_tokenizer.cpp): a PCRE2 regex in
// UTF and Unicode-property mode (\p{L}, \p{N}, \s as Unicode defines them) cuts text into
// the pieces BPE then merges within. Internal to data/.
//
// Lossless for any bytes: Split's pieces concatenate to the input. Valid UTF-8 runs are
// cut by the regex (findall semantics; text the pattern skips becomes a piece of its own,
// though neither GPT-2's nor Llama 3's pattern skips any); every byte of invalid UTF-8
// (a stray continuation byte, an overlong form, a surrogate, a truncated sequence) is a
// piece of one byte, so BPE still encodes it through the byte alphabet.
//
// Thread-safety: immutable after Compile; Split may run on many threads at once (each
// call makes its own PCRE2 match data).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace elastrain {

// GPT-2's pattern (openai/gpt-2 src/encoder.py).
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3's pattern (meta-llama tokenizer.py, tiktoken's cl100k_base form).
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

class PreTokenizer {
 public:
  static Result<PreTokenizer> Compile(std::string_view pattern);
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Calls `emit` with each piece of `text` (a view into it), in order. Fails only when
  // PCRE2 does (a match or JIT stack limit), naming the offset.
  Status Split(std::string_view text, const std::function<void(std::string_view)>& emit) const;
  // The same, collected (tests).
  Result<std::vector<std::string_view>> Split(std::string_view text) const;

 private:
  struct Impl;
  explicit PreTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Length of the longest prefix of `s` that is valid UTF-8 (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF), as PCRE2's UTF check defines it.
size_t ValidUtf8Prefix(std::string_view s);

}  // namespace elastrain
