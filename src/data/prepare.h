// `elastrain data prepare`: text and JSONL corpora tokenised, in parallel, into llm.c token
// files (data/token_files.h) that dataset_type=llmc reads, with a manifest.json
// (data/prepared_manifest.h) the trainer checks against its tokenizer (docs/datasets.md).
//
// The work is cut into units of about chunk_bytes of input, independent of the number of
// workers, so the files are the same whatever the parallelism and across a resume:
//  - a JSONL file at line boundaries; each document (a line's text_field) is one
//    Encode call, after the document token;
//  - a text file (one document) at line starts whose first byte is printable ASCII, a
//    place the GPT-2 and Llama 3 pre-tokenisation patterns never join across (a piece that
//    holds a newline holds whitespace only, or ends with it), so the tokens equal the
//    whole file's; sentencepiece has no such guarantee, so its text files are one unit.
// The document token is "<|endoftext|>" (GPT-2's, as llm.c writes it) or, without it,
// "<|begin_of_text|>" (Llama 3's); a tokenizer with neither (bytes, sentencepiece) gets
// none, and a JSONL document is followed by "\n" instead (as dataset_type=jsonl reads it).
//
// Each finished unit is a part file under OUTPUT/.prepare/ (written atomically, checked
// by its hash when reused), so an interrupted run (a signal, a kill, a full disk) resumes
// where it stopped. Then the parts are joined in order into shard_NNNNNN.bin files of
// shard_tokens tokens (the last one shorter), manifest.json is written last, and
// .prepare/ removed. A directory holding another plan's files is never written into.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/dataset_type.h"
#include "common/status.h"
#include "common/tokenizer_type.h"
#include "data/prepared_manifest.h"

namespace elastrain {

struct PrepareOptions {
  std::vector<std::string> inputs;  // files, directories or globs
  std::string output_dir;
  std::string tokenizer_path;                   // empty: bytes
  std::optional<TokenizerType> tokenizer_type;  // unset: chosen from the path (data/tokenizer.h)
  // text or jsonl; unset: jsonl when every input is a *.jsonl file, else text.
  std::optional<DatasetType> format;
  std::string text_field = "text";  // jsonl: the field holding the text (train_data_columns)
  int64_t shard_tokens = 100'000'000;  // llm.c's fineweb.py shard size
  int64_t chunk_bytes = 1 << 20;
  int workers = 0;  // 0: one per core
};

struct PrepareProgress {
  int64_t units_done = 0, units_total = 0, units_resumed = 0;
  uint64_t bytes_done = 0, bytes_total = 0;
  int64_t tokens_done = 0;  // in this run's units (not the resumed ones)
  double seconds = 0;
};

struct PrepareReport {
  PreparedManifest manifest;
  bool up_to_date = false;  // the directory already held this plan's files: nothing done
  int64_t units = 0, units_resumed = 0;
  int workers = 0;
  int64_t tokens_tokenised = 0;     // by this run (without the resumed units)
  uint64_t bytes_tokenised = 0;
  double tokenise_seconds = 0, seconds = 0;
};

// Runs the prepare. `progress` is called from the calling thread about every
// progress_period_seconds and once when every unit is tokenised; `stop`, when set, makes the
// workers finish their current unit and the call return Cancelled (the parts stay, a rerun
// resumes). Errors name the input file and byte range, or the output path.
Result<PrepareReport> PrepareTokenFiles(const PrepareOptions& options,
                                        const std::function<void(const PrepareProgress&)>& progress,
                                        double progress_period_seconds, const std::atomic<bool>* stop);

}  // namespace elastrain
