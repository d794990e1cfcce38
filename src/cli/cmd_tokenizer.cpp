// `elastrain tokenizer train --input PATH [--input PATH2 ...] --vocab-size N --output M.model`
// `elastrain tokenizer encode --tokenizer PATH [--type T] (--input FILE | --text S)`: the
//   ids, space-separated on one line of stdout; count, throughput and the tokenizer's id on
//   stderr.
// `elastrain tokenizer decode --tokenizer PATH [--type T] (--input FILE | --ids "1 2 3")`:
//   the bytes the ids stand for, exactly, on stdout.
// Exit codes: 0 done, 1 training or I/O failed, 2 bad usage or a tokenizer that does not
// load. Arguments parsed with CLI11.
#include <CLI/CLI.hpp>
#include <cctype>
#include <chrono>
#include <ctime>
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

struct UseOptions {
  std::string tokenizer, type, input, text, ids;
};

Result<std::unique_ptr<Tokenizer>> OpenTokenizer(const UseOptions& o) {
  std::optional<TokenizerType> type;
  if (!o.type.empty()) {
    type = ParseChoice(kTokenizerTypeChoices, o.type);
    if (!type)
      return Status::InvalidArgument("--type=" + o.type + ": expected one of " + ChoiceList(kTokenizerTypeChoices));
  }
  return LoadTokenizer(o.tokenizer, type);
}

// The text to encode or the ids to decode: --input's file, or the inline flag.
Result<std::string> InputText(const UseOptions& o, const std::string& inline_value, const char* inline_flag) {
  if (o.input.empty() == inline_value.empty())
    return Status::InvalidArgument(std::string("give exactly one of --input FILE and ") + inline_flag);
  if (!o.input.empty()) return ReadFile(o.input);
  return inline_value;
}

int EncodeCommand(const UseOptions& o) {
  auto tok = OpenTokenizer(o);
  if (!tok.ok()) return FailCommand("tokenizer", tok.status());
  auto text = InputText(o, o.text, "--text");
  if (!text.ok()) return FailCommand("tokenizer", text.status());
  // CPU time beside wall time: on a shared machine the wall-clock rate mostly measures the load.
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  auto ids = (*tok)->Encode(*text);
  const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!ids.ok()) return FailCommand("tokenizer", ids.status());
  std::string line;
  line.reserve(ids->size() * 6);
  for (size_t i = 0; i < ids->size(); ++i) {
    if (i) line.push_back(' ');
    line += std::to_string((*ids)[i]);
  }
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fprintf(stderr,
               "encoded %zu bytes into %zu tokens in %.3f s (%.2f MB/s), %.3f s of CPU (%.2f MB/s); tokenizer %s, "
               "vocab %lld\n",
               text->size(), ids->size(), secs, secs > 0 ? text->size() / secs / 1e6 : 0.0, cpu,
               cpu > 0 ? text->size() / cpu / 1e6 : 0.0, (*tok)->id().c_str(),
               static_cast<long long>((*tok)->vocab_size()));
  return kExitSuccess;
}

int DecodeCommand(const UseOptions& o) {
  auto tok = OpenTokenizer(o);
  if (!tok.ok()) return FailCommand("tokenizer", tok.status());
  auto text = InputText(o, o.ids, "--ids");
  if (!text.ok()) return FailCommand("tokenizer", text.status());
  std::vector<int32_t> ids;
  const std::string& s = *text;
  for (size_t i = 0; i < s.size();) {
    if (std::isspace(static_cast<unsigned char>(s[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    int64_t v = 0;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])) && v <= (*tok)->vocab_size())
      v = v * 10 + (s[j++] - '0');
    if (j == i || (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) || v >= (*tok)->vocab_size())
      return FailCommand("tokenizer", Status::InvalidArgument(
                                          "id " + s.substr(i, std::min<size_t>(20, s.find_first_of(" \t\r\n", i) - i)) +
                                          " (token " + std::to_string(ids.size() + 1) + "): expected an integer in [0, " +
                                          std::to_string((*tok)->vocab_size()) + ")"));
    ids.push_back(static_cast<int32_t>(v));
    i = j;
  }
  const std::string out = (*tok)->Decode(ids);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitSuccess;
}

}  // namespace

int RunTokenizerCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain tokenizer: train a sentencepiece BPE tokenizer, or encode and decode with any tokenizer"};
  app.require_subcommand(1, 1);
  std::vector<std::string> inputs;
  std::string vocab, output;
  CLI::App* train = app.add_subcommand("train", "train a sentencepiece BPE model on text files");
  train->add_option("--input", inputs, "a text file or a directory of text files (repeatable)")
      ->required()
      ->allow_extra_args(false);
  train->add_option("--vocab-size", vocab, "vocabulary size, including 256 byte pieces and 3 specials")->required();
  train->add_option("--output", output, "where to write the sentencepiece BPE model (M.vocab beside it)")->required();
  UseOptions use;
  CLI::App* encode = app.add_subcommand("encode", "print the ids of a text (to check a tokenizer)");
  CLI::App* decode = app.add_subcommand("decode", "print the text of ids");
  for (CLI::App* sub : {encode, decode}) {
    sub->add_option("--tokenizer", use.tokenizer, "tokenizer_path: a .model file, a tiktoken file, or a directory with vocab.json and merges.txt")->required();
    sub->add_option("--type", use.type, "tokenizer_type: bytes | sentencepiece | tiktoken | huggingface; default: from the path");
    sub->add_option("--input", use.input, encode == sub ? "a file of text" : "a file of ids, separated by whitespace");
  }
  encode->add_option("--text", use.text, "the text itself");
  decode->add_option("--ids", use.ids, "the ids, separated by spaces");
  if (int rc = ParseArgs(app, "tokenizer", args); rc >= 0) return rc;
  if (encode->parsed()) return EncodeCommand(use);
  if (decode->parsed()) return DecodeCommand(use);
  auto vocab_size = ParseVocabSize(vocab);
  if (!vocab_size.ok()) return FailCommand("tokenizer", vocab_size.status());
  return TrainTokenizer(inputs, vocab_size.value(), output);
}

}  // namespace elastrain
