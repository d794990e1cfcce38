// `elastrain tokenizer train --input PATH [--input PATH2 ...] --vocab-size N --output M.model`
// Exit codes: 0 written, 1 training or I/O failed, 2 bad usage.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/files.h"
#include "data/tokenizer.h"

namespace elastrain {

namespace {

constexpr const char* kUsage =
    "usage: elastrain tokenizer train --input PATH [--input PATH ...] --vocab-size N --output M.model\n"
    "  --input PATH      a text file or a directory of text files (repeatable)\n"
    "  --vocab-size N    vocabulary size, including 256 byte pieces and 3 specials\n"
    "  --output M.model  where to write the sentencepiece BPE model (M.vocab beside it)\n";

int UsageError(const std::string& msg) {
  std::fprintf(stderr, "elastrain tokenizer: %s\n%s", msg.c_str(), kUsage);
  return 2;
}

struct TrainArgs {
  std::vector<std::string> inputs;
  int64_t vocab_size = 0;
  std::string output;
};

// Parses "--flag VALUE" and "--flag=VALUE"; returns an empty string or the error.
std::string ParseTrainArgs(const std::vector<std::string>& args, TrainArgs* out) {
  std::string vocab;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    const size_t eq = flag.find('=');
    if (flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (flag == "--input" || flag == "--vocab-size" || flag == "--output") {
      if (i + 1 == args.size()) return flag + ": missing value";
      value = args[++i];
    }
    if (flag == "--input") {
      out->inputs.push_back(value);
    } else if (flag == "--vocab-size") {
      vocab = value;
    } else if (flag == "--output") {
      out->output = value;
    } else {
      return "unknown argument '" + args[i] + "'";
    }
  }
  if (out->inputs.empty()) return "--input is required";
  if (out->output.empty()) return "--output is required";
  if (vocab.empty()) return "--vocab-size is required";
  size_t used = 0;
  try {
    out->vocab_size = std::stoll(vocab, &used);
  } catch (...) {
    used = 0;
  }
  if (used != vocab.size() || out->vocab_size <= 0) return "--vocab-size=" + vocab + ": expected a positive integer";
  return "";
}

int RunTrain(const std::vector<std::string>& args) {
  TrainArgs a;
  if (std::string err = ParseTrainArgs(args, &a); !err.empty()) return UsageError(err);
  for (const std::string& in : a.inputs)
    if (!FileExists(in)) {
      std::fprintf(stderr, "elastrain tokenizer: --input %s: no such file or directory\n", in.c_str());
      return 2;
    }
  Status st = TrainSentencePiece(a.inputs, a.vocab_size, a.output);
  if (!st.ok()) {
    std::fprintf(stderr, "elastrain tokenizer: %s\n", st.ToString().c_str());
    return st.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  auto tok = SentencePieceTokenizer::Load(a.output);
  if (!tok.ok()) {
    std::fprintf(stderr, "elastrain tokenizer: %s\n", tok.status().ToString().c_str());
    return 1;
  }
  std::printf("wrote %s (sentencepiece BPE, vocab %lld, id %s)\n", a.output.c_str(),
              static_cast<long long>((*tok)->vocab_size()), (*tok)->id().c_str());
  return 0;
}

}  // namespace

int RunTokenizerCommand(const std::vector<std::string>& args) {
  if (args.empty()) return UsageError("missing subcommand");
  if (args[0] == "-h" || args[0] == "--help") {
    std::printf("%s", kUsage);
    return 0;
  }
  if (args[0] != "train") return UsageError("unknown subcommand '" + args[0] + "'");
  std::vector<std::string> rest(args.begin() + 1, args.end());
  for (const std::string& a : rest)
    if (a == "-h" || a == "--help") {
      std::printf("%s", kUsage);
      return 0;
    }
  return RunTrain(rest);
}

}  // namespace elastrain
