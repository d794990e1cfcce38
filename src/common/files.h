// File helpers: whole-file reads, atomic writes (temp + fsync + rename), directories,
// and content hashing with xxHash.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace elastrain {

Result<std::string> ReadFile(const std::string& path);
// Writes `data` to `path` so that a reader sees either the old file or the whole new
// one: write `path.tmp.<pid>`, fsync it, rename onto `path`, fsync the directory. The
// file is 0644 less the umask; with `mode`, exactly `mode`, from its creation on (created
// with it, then fchmod past the umask): a private file is never readable by others.
Status WriteFileAtomic(const std::string& path, const std::string& data, std::optional<unsigned> mode = std::nullopt);
// Creates `path` holding `text` with exactly `mode` (whatever the umask), never replacing
// a file and never through a link: written to `path.tmp.<pid>` (O_EXCL | O_NOFOLLOW),
// fsynced, then link(2)ed into place. True when made; false when something (a file, a
// link) is already at `path` (another writer won the race); an error naming `what`.
Result<bool> CreateFileExclusive(const std::string& path, const std::string& text, unsigned mode,
                                 const std::string& what);
// Creates `path` and its parents (like mkdir -p).
Status MakeDirs(const std::string& path);
bool FileExists(const std::string& path);
bool IsDirectory(const std::string& path);
// Whether `path` (a file or directory that exists) sits on a read-only file system.
bool OnReadOnlyFileSystem(const std::string& path);
// Regular files directly under `dir` or below it, sorted by path.
Result<std::vector<std::string>> ListFilesRecursive(const std::string& dir);

// 64-bit xxHash (XXH3) of a buffer; streaming hasher for large inputs.
uint64_t Hash64(const void* data, size_t size, uint64_t seed = 0);
std::string HexU64(uint64_t v);
// SplitMix64: a fixed, platform-independent 64-bit mix, for seeds derived from seeds.
uint64_t SplitMix64(uint64_t x);

}  // namespace elastrain
