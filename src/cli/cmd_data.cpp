// `elastrain data prepare INPUT... --output DIR [--tokenizer PATH] [--type T]
//   [--format text|jsonl] [--text-field F] [--shard-tokens N] [--chunk-bytes N] [--workers N]`:
// text and JSONL corpora tokenised into llm.c token files with a manifest.json
// (data/prepare.h, docs/datasets.md). A progress line on stderr (redrawn on a terminal,
// every few seconds otherwise); at the end, the files, tokens/s and how busy the cores
// were. SIGINT or SIGTERM stops after the chunks in hand; the same command resumes.
// Exit codes: 0 done (or nothing to do), 1 failed or interrupted, 2 bad usage.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/cpu_usage.h"
#include "common/signals.h"
#include "data/prepare.h"
#include "wire/exit_codes.h"

namespace elastrain {

namespace {

std::atomic<bool> g_stop{false};

std::string Rate(double per_second) {
  if (per_second >= 1e6) return fmt::format("{:.2f}M", per_second / 1e6);
  if (per_second >= 1e3) return fmt::format("{:.1f}k", per_second / 1e3);
  return fmt::format("{:.0f}", per_second);
}

void PrintProgress(const PrepareProgress& p, bool tty) {
  const double frac = p.bytes_total ? static_cast<double>(p.bytes_done) / p.bytes_total : 1.0;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(frac * kWidth);
  const double rate = p.seconds > 0 ? p.tokens_done / p.seconds : 0;
  const double byte_rate = p.seconds > 0 ? (p.bytes_done - 0.0) / p.seconds : 0;
  const double eta = byte_rate > 0 ? (p.bytes_total - p.bytes_done) / byte_rate : 0;
  std::string line = fmt::format("[{}{}] {:5.1f}%  {:.1f}/{:.1f} MB  chunk {}/{}{}  {} tokens  {} tokens/s  eta {:.0f}s",
                                 std::string(filled, '#'), std::string(kWidth - filled, '.'), 100 * frac,
                                 p.bytes_done / 1e6, p.bytes_total / 1e6, p.units_done, p.units_total,
                                 p.units_resumed ? fmt::format(" ({} resumed)", p.units_resumed) : "",
                                 Rate(static_cast<double>(p.tokens_done)), Rate(rate), eta);
  if (tty) {
    std::fprintf(stderr, "\r%s\033[K", line.c_str());
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

int Prepare(PrepareOptions o, const std::string& type, const std::string& format) {
  if (!type.empty()) {
    o.tokenizer_type = ParseChoice(kTokenizerTypeChoices, type);
    if (!o.tokenizer_type)
      return FailCommand("data prepare",
                         Status::InvalidArgument("--type=" + type + ": expected one of " +
                                                 ChoiceList(kTokenizerTypeChoices)));
  }
  if (!format.empty()) {
    if (format == "text") o.format = DatasetType::kText;
    else if (format == "jsonl") o.format = DatasetType::kJsonl;
    else return FailCommand("data prepare", Status::InvalidArgument("--format=" + format + ": expected text or jsonl"));
  }
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  TerminationNotice notice([](int) { g_stop = true; }, TerminationNotice::Repeat::kSecondSignalKills);
  const CpuSnapshot cpu_start = TakeCpuSnapshot();
  auto report = PrepareTokenFiles(o, [&](const PrepareProgress& p) { PrintProgress(p, tty); }, tty ? 0.25 : 5.0,
                                  &g_stop);
  const CpuUsage cpu = CpuUsageBetween(cpu_start, TakeCpuSnapshot());
  if (tty) std::fprintf(stderr, "\n");
  if (!report.ok()) return FailCommand("data prepare", report.status());
  const PreparedManifest& m = report->manifest;
  if (report->up_to_date) {
    std::printf("%s: already prepared (manifest.json: %lld tokens in %zu shards, tokenizer %s): nothing to do\n",
                o.output_dir.c_str(), static_cast<long long>(m.tokens), m.shards.size(), m.tokenizer_id.c_str());
    return kExitSuccess;
  }
  const PrepareReport& r = *report;
  std::printf("wrote %zu shard(s) of llm.c v%d tokens (%s) to %s: %lld tokens, %lld documents, from %zu file(s), "
              "%.1f MB\n",
              m.shards.size(), m.llmc_version, m.llmc_version == 1 ? "uint16" : "uint32", o.output_dir.c_str(),
              static_cast<long long>(m.tokens), static_cast<long long>(m.documents), m.inputs.size(), m.bytes / 1e6);
  std::printf("tokenizer %s (%s, vocab %lld), document token %s\n", m.tokenizer_id.c_str(), m.tokenizer_type.c_str(),
              static_cast<long long>(m.vocab_size),
              m.document_token ? fmt::format("{} = {}", *m.document_token, m.document_token_id).c_str() : "none");
  const double t = r.tokenise_seconds;
  std::printf("tokenised %lld chunks of %lld (%lld resumed) with %d workers: %.1f MB, %lld tokens in %.2f s = %s "
              "tokens/s, %.2f MB/s; %.2f s in all\n",
              static_cast<long long>(r.units - r.units_resumed), static_cast<long long>(r.units),
              static_cast<long long>(r.units_resumed), r.workers, r.bytes_tokenised / 1e6,
              static_cast<long long>(r.tokens_tokenised), t, Rate(t > 0 ? r.tokens_tokenised / t : 0).c_str(),
              t > 0 ? r.bytes_tokenised / t / 1e6 : 0.0, r.seconds);
  std::printf("cpu: %s\n", cpu.ToString().c_str());
  return kExitSuccess;
}

}  // namespace

int RunDataCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain data: prepare corpora for training"};
  app.require_subcommand(1, 1);
  PrepareOptions o;
  std::string type, format;
  CLI::App* prep = app.add_subcommand("prepare", "tokenise text or JSONL files into llm.c token files (dataset_type=llmc)");
  prep->add_option("inputs", o.inputs, "text or .jsonl files, directories or globs")->required();
  prep->add_option("--output", o.output_dir, "the directory to write shard_NNNNNN.bin and manifest.json into")
      ->required();
  prep->add_option("--tokenizer", o.tokenizer_path,
                   "tokenizer_path: a .model file, a tiktoken file, or a directory with vocab.json and merges.txt; "
                   "default: bytes");
  prep->add_option("--type", type, "tokenizer_type: bytes | sentencepiece | tiktoken | huggingface; default: from the path");
  prep->add_option("--format", format, "text | jsonl; default: jsonl when every input is a *.jsonl file");
  prep->add_option("--text-field", o.text_field, "jsonl: the field holding the text (train_data_columns)");
  prep->add_option("--shard-tokens", o.shard_tokens, "tokens per shard file (llm.c: 100000000)");
  prep->add_option("--chunk-bytes", o.chunk_bytes, "input bytes per unit of work (1048576)");
  prep->add_option("--workers", o.workers, "tokenising threads; 0: one per core");
  if (int rc = ParseArgs(app, "data", args); rc >= 0) return rc;
  return Prepare(std::move(o), type, format);
}

}  // namespace elastrain
