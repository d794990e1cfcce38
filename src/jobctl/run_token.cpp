#include "jobctl/run_token.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "common/files.h"

namespace elastrain {

namespace {

std::string RandomHex(size_t bytes) {
  std::random_device rd;  // /dev/urandom
  std::string s;
  for (size_t i = 0; i < bytes; ++i) s += fmt::format("{:02x}", rd() & 0xff);
  return s;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

Result<std::string> ReadRunToken(const std::string& run_dir) {
  const std::string path = run_dir + "/" + kTokenFileName;
  auto text = ReadFile(path);
  if (!text.ok()) return Status::NotFound(fmt::format("no API token at {} ({})", path, text.status().message()));
  std::string t = Trim(text.value());
  if (t.empty()) return Status::NotFound(fmt::format("the API token file {} is empty", path));
  return t;
}

Result<std::string> EnsureRunToken(const std::string& run_dir) {
  const std::string path = run_dir + "/" + kTokenFileName;
  if (access(path.c_str(), F_OK) == 0) return ReadRunToken(run_dir);
  ELASTRAIN_RETURN_IF_ERROR(MakeDirs(run_dir));
  const std::string token = RandomHex(32);
  // O_EXCL: two processes racing to create it keep one token.
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return ReadRunToken(run_dir);
    return Status::Internal(fmt::format("cannot create the API token file {}: {}", path, std::strerror(errno)));
  }
  const std::string line = token + "\n";
  const bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const bool closed = close(fd) == 0;
  if (!ok || !closed) {
    unlink(path.c_str());
    return Status::Internal(fmt::format("cannot write the API token file {}: {}", path, std::strerror(errno)));
  }
  return token;
}

bool BearerMatches(const std::string& authorization, const std::string& token) {
  static constexpr char kPrefix[] = "Bearer ";
  if (token.empty() || authorization.rfind(kPrefix, 0) != 0) return false;
  const std::string given = authorization.substr(sizeof(kPrefix) - 1);
  if (given.size() != token.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < token.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ token[i]);
  return diff == 0;
}

}  // namespace elastrain
