// Reading a text corpus from disk: `dataset_path` is a text file or a directory.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace elastrain {

// The corpus files under `path`, sorted by path. A regular file (or a link to one) is
// returned as is. A directory is walked recursively taking regular files only: symlinks
// are skipped (Debian's fortunes has `x.u8 -> x`, which would otherwise be read twice)
// and so are files that look binary (a NUL byte in the first 8 KiB, e.g. fortunes' .dat
// indexes). Errors name the path; a directory without any text file is an error.
Result<std::vector<std::string>> ListCorpusFiles(const std::string& path);

// The files of a dataset_path for a binary or structured format, sorted by path: a
// regular file as is; a directory: the regular files under it (recursively, links to
// files too) whose name ends in `suffix` (".bin"); or a glob pattern (*, ?, [...]) of
// regular files, when no file has that very name. None found is NotFound naming `what`.
Result<std::vector<std::string>> ListDataFiles(const std::string& path, const std::string& suffix,
                                               const std::string& what);
bool LooksLikeGlob(const std::string& path);

// True if the first 8 KiB of `data` contain a NUL byte.
bool LooksBinary(const std::string& data);

}  // namespace elastrain
