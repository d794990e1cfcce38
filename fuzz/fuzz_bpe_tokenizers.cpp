// The BPE tokenizer files (src/data/tokenizer.h): GPT-2's vocab.json + merges.txt and
// tiktoken's "base64 rank" lines. The first input byte picks the reader (even: GPT-2, odd:
// tiktoken); for GPT-2 the rest is vocab.json, a NUL, then merges.txt. Readers may refuse
// any input. Properties of an accepted file: the input itself, encoded, gives ids in
// [0, vocab_size) that decode back to exactly the input's bytes (byte-level BPE is
// lossless for any bytes, valid UTF-8 or not).
#include <spdlog/spdlog.h>

#include <string>
#include <string_view>

#include "data/tokenizer.h"
#include "fuzz_check.h"

using namespace elastrain;

namespace {

void CheckRoundTrip(const Tokenizer& tok, const std::string& text) {
  Result<std::vector<int32_t>> ids = tok.Encode(text);
  FUZZ_CHECK(ids.ok(), "Encode failed on text of an accepted vocabulary");
  for (int32_t id : *ids) FUZZ_CHECK(id >= 0 && id < tok.vocab_size(), "an id outside [0, vocab_size)");
  FUZZ_CHECK(tok.Decode(*ids) == text, "decode(encode(x)) != x");
  FUZZ_CHECK(!tok.id().empty(), "an empty tokenizer id");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
  static const bool quiet = [] {
    spdlog::set_level(spdlog::level::off);
    return true;
  }();
  (void)quiet;
  if (size == 0) return 0;
  const std::string input = fuzz::AsString(data + 1, size - 1);
  const std::string sample = input + " Hello, wörld! 123 don't 日本語 👍🏽\n\n  ";
  if (data[0] % 2 == 0) {
    const size_t nul = input.find('\0');
    const std::string_view vocab = std::string_view(input).substr(0, nul);
    const std::string_view merges = nul == std::string::npos ? std::string_view() : std::string_view(input).substr(nul + 1);
    auto tok = Gpt2BpeTokenizer::FromText(vocab, merges, "vocab.json", "merges.txt");
    if (!tok.ok()) {
      FUZZ_CHECK(!tok.status().message().empty(), "a refusal without a message");
      return 0;
    }
    CheckRoundTrip(**tok, sample);
  } else {
    auto tok = TiktokenTokenizer::FromText(input, "tokenizer.model");
    if (!tok.ok()) {
      FUZZ_CHECK(!tok.status().message().empty(), "a refusal without a message");
      return 0;
    }
    CheckRoundTrip(**tok, sample);
  }
  return 0;
}
