// Writes llm.c token files (data/token_files.h has the layout) as a stream of tokens cut
// into shards of a fixed count: DIR/shard_000000.bin, shard_000001.bin, ... Each shard is
// written to NAME.tmp, its header filled in when it is full (or at Finish), fsynced and
// renamed into place, so a shard under its own name is whole. Errors name the file and
// the system's reason (a full disk is "No space left on device").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

struct XXH3_state_s;  // <xxhash.h>

namespace elastrain {

struct WrittenShard {
  std::string file;   // the name in the directory
  int64_t tokens = 0;
  uint64_t hash = 0;  // XXH3 of the tokens (the bytes after the header)
};

class LlmcShardWriter {
 public:
  // version 1: uint16 tokens (ids below 65536), 2: uint32.
  LlmcShardWriter(std::string dir, int version, int64_t shard_tokens);
  ~LlmcShardWriter();  // an unfinished shard's .tmp is removed
  LlmcShardWriter(const LlmcShardWriter&) = delete;
  LlmcShardWriter& operator=(const LlmcShardWriter&) = delete;

  Status Append(const std::vector<int32_t>& tokens);
  // Closes the last shard (when it holds any token).
  Status Finish();
  const std::vector<WrittenShard>& shards() const { return shards_; }

 private:
  Status Open();
  Status Close();
  Status Flush();

  std::string dir_;
  int version_;
  int64_t shard_tokens_;
  int fd_ = -1;
  std::string tmp_path_;
  int64_t count_ = 0;  // tokens in the open shard
  std::string buffer_;  // encoded tokens not yet written
  std::unique_ptr<XXH3_state_s, void (*)(XXH3_state_s*)> hash_;
  std::vector<WrittenShard> shards_;
};

}  // namespace elastrain
