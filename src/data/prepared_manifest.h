// manifest.json: what `elastrain data prepare` (data/prepare.h) wrote into a directory of
// llm.c token files, and how the trainer checks token files against it.
//
//   {"elastrain_prepare": 1, "plan": "<hex>", "format": "llm.c", "llmc_version": 1,
//    "tokenizer": {"id": "gpt2bpe:<hex>", "type": "huggingface", "path": "...",
//                  "vocab_size": 50257, "document_token": "<|endoftext|>",
//                  "document_token_id": 50256},
//    "text_field": "text",
//    "inputs": [{"path": "/abs/a.txt", "format": "text", "bytes": N, "xxh3": "<hex>",
//                "documents": D, "tokens": T}],
//    "shards": [{"file": "shard_000000.bin", "tokens": N, "xxh3": "<hex>"}],
//    "tokens": N, "documents": D, "bytes": B, "seconds": S}
//
// "plan" is the hash of everything that decides the files (tokenizer id, inputs' paths,
// sizes and contents, options): a rerun with the same plan has nothing to do, another
// plan never writes into the directory. The file is read as an attacker's: every field
// is checked for type and range, and errors name the file and the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace elastrain {

inline constexpr char kPreparedManifestName[] = "manifest.json";
inline constexpr int kPreparedManifestVersion = 1;

struct PreparedInput {
  std::string path;    // absolute
  std::string format;  // "text" or "jsonl"
  uint64_t bytes = 0;
  uint64_t hash = 0;   // XXH3 of the content
  int64_t documents = 0;
  int64_t tokens = 0;
};

struct PreparedShard {
  std::string file;  // a name in the manifest's directory
  int64_t tokens = 0;
  uint64_t hash = 0;  // XXH3 of the tokens (the bytes after the 1024-byte header)
};

struct PreparedManifest {
  std::string plan;  // hex
  int llmc_version = 1;  // 1: uint16 tokens, 2: uint32
  std::string tokenizer_id, tokenizer_type, tokenizer_path;
  int64_t vocab_size = 0;
  std::optional<std::string> document_token;  // the special each document starts with
  int64_t document_token_id = -1;
  std::string text_field;
  std::vector<PreparedInput> inputs;
  std::vector<PreparedShard> shards;
  int64_t tokens = 0, documents = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

std::string PreparedManifestJson(const PreparedManifest& m);
// `path` names the file in errors.
Result<PreparedManifest> ParsePreparedManifest(const std::string& text, const std::string& path);

// One opened llm.c token file, for the check below.
struct TokenFileCount {
  std::string path;
  int64_t tokens = 0;
};
// Checks llm.c token files against the manifest.json beside each (files in a directory
// without one are not checked, unless it holds an unfinished prepare's .prepare/): the file is one of the manifest's shards and holds its
// count of tokens, and, when `tokenizer_id` is not empty, the manifest's tokenizer is that
// one. A mismatch is FailedPrecondition naming the file, the manifest and both values.
// Appends one line per manifest read to `notes` (for the log).
Status CheckPreparedTokenFiles(const std::vector<TokenFileCount>& files, const std::string& tokenizer_id,
                               std::vector<std::string>* notes);

}  // namespace elastrain
