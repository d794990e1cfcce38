// Scratch directories for unit tests: the one place tests make temporary directories.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

namespace elastrain {

// A new, uniquely named directory under gtest's temp dir ($TEST_TMPDIR, else /tmp/)
// (mkdtemp: unique even across forked processes and repeated names), removed with
// everything in it when this object goes. ELASTRAIN_KEEP_TEST_DIRS=1 keeps it, and
// prints its path, for a look after a failure. A forked child that leaves by _exit
// removes nothing: the parent's object does.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& name) {
    std::string tmpl = (std::filesystem::path(testing::TempDir()) / ("elastrain_" + name + "_XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
    else ADD_FAILURE() << "mkdtemp " << tmpl << " failed: " << std::strerror(errno);
  }
  ~ScopedTempDir() {
    if (path_.empty()) return;
    if (const char* keep = std::getenv("ELASTRAIN_KEEP_TEST_DIRS"); keep != nullptr && std::string(keep) == "1") {
      std::fprintf(stderr, "ELASTRAIN_KEEP_TEST_DIRS=1: kept %s\n", path_.c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(ScopedTempDir&& other) noexcept : path_(std::exchange(other.path_, std::string())) {}
  ScopedTempDir& operator=(ScopedTempDir&&) = delete;
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace elastrain
