// Which tokenizer reads `tokenizer_path` (the tokenizer_type config key, MaxText's name and
// words, plus elastrain's "bytes"). Here in common so that the config names it and data/
// opens it without depending on each other. Unset: chosen from the path (data/tokenizer.h).
#pragma once

#include <array>
#include <string_view>

#include "common/choice.h"

namespace elastrain {

enum class TokenizerType {
  kBytes,          // ids 0..255 are the bytes; no file
  kSentencePiece,  // a sentencepiece .model (Llama 2)
  kTiktoken,       // lines of "base64(token) rank" (Llama 3's tokenizer.model)
  kHuggingFace,    // GPT-2 byte-level BPE: vocab.json + merges.txt
};
inline constexpr std::array<Choice<TokenizerType>, 4> kTokenizerTypeChoices = {{
    {"bytes", TokenizerType::kBytes},
    {"sentencepiece", TokenizerType::kSentencePiece},
    {"tiktoken", TokenizerType::kTiktoken},
    {"huggingface", TokenizerType::kHuggingFace},
}};
constexpr std::string_view TokenizerTypeName(TokenizerType t) { return ChoiceWord(kTokenizerTypeChoices, t); }

}  // namespace elastrain
