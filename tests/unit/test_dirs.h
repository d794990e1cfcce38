// Scratch directories for unit tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace elastrain {

// An empty directory under the test temp dir, unique per test name and process.
inline std::string FreshDir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(testing::TempDir()) / ("elastrain_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

}  // namespace elastrain
