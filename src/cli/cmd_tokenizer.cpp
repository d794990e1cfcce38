// `elastrain tokenizer train --input PATH [--input PATH2 ...] --vocab-size N --output M.model`
// Exit codes: 0 written, 1 training or I/O failed, 2 bad usage. Arguments parsed with CLI11.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/files.h"
#include "data/tokenizer.h"
#include "wire/exit_codes.h"

namespace elastrain {

namespace {

// --vocab-size N: a positive integer; the message names the flag and the value.
Result<int64_t> ParseVocabSize(const std::string& vocab) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(vocab, &used);
  } catch (...) {
    used = 0;
  }
  if (used != vocab.size() || v <= 0)
    return Status::InvalidArgument("--vocab-size=" + vocab + ": expected a positive integer");
  return v;
}

int TrainTokenizer(const std::vector<std::string>& inputs, int64_t vocab_size, const std::string& output) {
  for (const std::string& in : inputs)
    if (!FileExists(in)) {
      std::fprintf(stderr, "elastrain tokenizer: --input %s: no such file or directory\n", in.c_str());
      return kExitBadConfig;
    }
  Status st = TrainSentencePiece(inputs, vocab_size, output);
  if (!st.ok()) {
    std::fprintf(stderr, "elastrain tokenizer: %s\n", st.ToString().c_str());
    return st.code() == StatusCode::kInvalidArgument ? kExitBadConfig : kExitFailure;
  }
  auto tok = SentencePieceTokenizer::Load(output);
  if (!tok.ok()) {
    std::fprintf(stderr, "elastrain tokenizer: %s\n", tok.status().ToString().c_str());
    return kExitFailure;
  }
  std::printf("wrote %s (sentencepiece BPE, vocab %lld, id %s)\n", output.c_str(),
              static_cast<long long>((*tok)->vocab_size()), (*tok)->id().c_str());
  return kExitSuccess;
}

}  // namespace

int RunTokenizerCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain tokenizer: train a sentencepiece BPE tokenizer"};
  app.require_subcommand(1, 1);
  std::vector<std::string> inputs;
  std::string vocab, output;
  CLI::App* train = app.add_subcommand("train", "train a sentencepiece BPE model on text files");
  train->add_option("--input", inputs, "a text file or a directory of text files (repeatable)")
      ->required()
      ->allow_extra_args(false);
  train->add_option("--vocab-size", vocab, "vocabulary size, including 256 byte pieces and 3 specials")->required();
  train->add_option("--output", output, "where to write the sentencepiece BPE model (M.vocab beside it)")->required();
  if (int rc = ParseArgs(app, "tokenizer", args); rc >= 0) return rc;
  auto vocab_size = ParseVocabSize(vocab);
  if (!vocab_size.ok()) return FailCommand("tokenizer", vocab_size.status());
  return TrainTokenizer(inputs, vocab_size.value(), output);
}

}  // namespace elastrain
