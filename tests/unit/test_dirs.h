// Scratch directories for unit tests: the one place tests make temporary directories.
// Both live under gtest's temp dir ($TEST_TMPDIR, else /tmp/).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace elastrain {

// An empty directory named after `name` and this process, emptied if an earlier run of
// the same test left it behind. It stays after the test, for a look at a failure.
inline std::string FreshDir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(testing::TempDir()) / ("elastrain_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// A new, uniquely named directory (mkdtemp: unique even across forked processes and
// repeated names), removed with everything in it when this object goes.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& name) {
    std::string tmpl = (std::filesystem::path(testing::TempDir()) / ("elastrain_" + name + "_XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
    else ADD_FAILURE() << "mkdtemp " << tmpl << " failed";
  }
  ~ScopedTempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace elastrain
