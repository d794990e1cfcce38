#include "data/corpus.h"

#include <glob.h>

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
bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

bool LooksLikeGlob(const std::string& path) {
  std::error_code ec;
  return path.find_first_of("*?[") != std::string::npos && !fs::exists(path, ec);
}

Result<std::vector<std::string>> ListDataFiles(const std::string& path, const std::string& suffix,
                                               const std::string& what) {
  std::vector<std::string> files;
  std::error_code ec;
  if (LooksLikeGlob(path)) {
    glob_t g{};
    const int rc = ::glob(path.c_str(), GLOB_ERR, nullptr, &g);
    if (rc == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i)
        if (std::error_code fec; fs::is_regular_file(g.gl_pathv[i], fec)) files.emplace_back(g.gl_pathv[i]);
    globfree(&g);
    if (rc != 0 && rc != GLOB_NOMATCH) return Status::IOError("dataset_path=" + path + ": cannot expand the glob");
  } else if (fs::is_directory(path, ec)) {
    for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      std::error_code fec;
      if (EndsWith(it->path().string(), suffix) && fs::is_regular_file(it->path(), fec))
        files.push_back(it->path().string());
    }
    if (ec) return Status::IOError(path + ": cannot list directory (" + ec.message() + ")");
  } else if (fs::is_regular_file(path, ec)) {
    files = {path};
  } else {
    return Status::NotFound("dataset_path=" + path + ": no such file or directory");
  }
  std::sort(files.begin(), files.end());
  if (files.empty())
    return Status::NotFound("dataset_path=" + path + ": no " + what + " found" +
                            (fs::is_directory(path, ec) ? " (files named *" + suffix + ")" : std::string()));
  return files;
}

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
