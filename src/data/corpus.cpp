#include "data/corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/log.h"

namespace elastrain {
namespace fs = std::filesystem;

namespace {
constexpr size_t kBinaryProbeBytes = 8192;

Result<bool> FileLooksBinary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError(path + ": cannot open for reading");
  std::string head(kBinaryProbeBytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  if (in.bad()) return Status::IOError(path + ": read failed");
  head.resize(static_cast<size_t>(in.gcount()));
  return LooksBinary(head);
}
}  // namespace

bool LooksBinary(const std::string& data) {
  size_t n = std::min(data.size(), kBinaryProbeBytes);
  return std::find(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(n), '\0') !=
         data.begin() + static_cast<std::ptrdiff_t>(n);
}

Result<std::vector<std::string>> ListCorpusFiles(const std::string& path) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return Status::NotFound(path + ": no such file or directory");
  if (fs::is_regular_file(st)) return std::vector<std::string>{path};
  if (!fs::is_directory(st))
    return Status::InvalidArgument(path + ": expected a text file or a directory of text files");

  std::vector<std::string> files;
  int skipped_binary = 0, skipped_links = 0;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const fs::directory_entry& e = *it;
    std::error_code eec;
    if (e.is_symlink(eec)) {
      ++skipped_links;
      continue;
    }
    if (!e.is_regular_file(eec)) continue;
    std::string file = e.path().string();
    ELASTRAIN_ASSIGN_OR_RETURN(bool binary, FileLooksBinary(file));
    if (binary) {
      LOG_DEBUG("corpus: skipping binary file {}", file);
      ++skipped_binary;
      continue;
    }
    files.push_back(std::move(file));
  }
  if (ec) return Status::IOError(path + ": cannot list directory (" + ec.message() + ")");
  std::sort(files.begin(), files.end());
  if (files.empty())
    return Status::InvalidArgument(path + ": directory holds no text files (skipped " +
                                   std::to_string(skipped_binary) + " binary files and " +
                                   std::to_string(skipped_links) + " symlinks)");
  LOG_DEBUG("corpus: {} text files under {} (skipped {} binary, {} symlinks)", files.size(), path,
            skipped_binary, skipped_links);
  return files;
}

}  // namespace elastrain
