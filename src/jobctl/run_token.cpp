#include "jobctl/run_token.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "common/files.h"
#include "common/safe_path.h"
#include "common/secret_file.h"

namespace elastrain {

namespace {

namespace fs = std::filesystem;

constexpr size_t kTokenHexDigits = 2 * kTokenBytes;
constexpr mode_t kTokenMode = 0600;

std::string RandomHex(size_t bytes) {
  std::random_device rd;  // /dev/urandom (getrandom) on Linux
  std::string s;
  for (size_t i = 0; i < bytes; ++i) s += fmt::format("{:02x}", rd() & 0xff);
  return s;
}

bool IsHexToken(std::string_view t) {
  if (t.size() != kTokenHexDigits) return false;
  for (char c : t)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string UserName(uid_t uid) {
  const passwd* pw = getpwuid(uid);
  return pw ? fmt::format("{} (uid {})", pw->pw_name, uid) : fmt::format("uid {}", uid);
}

const char* FileKind(mode_t m) {
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  return "not a regular file";
}

// Closes a descriptor on every path out.
// What is wrong with the open file `fd` at `path`; OK when it passes the trust rule.
Status CheckTrusted(const std::string& path, int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return Status::IOError(fmt::format("cannot stat the API token file {}: {}", path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    return Status::InvalidArgument(fmt::format("the API token file {} is {}; expected a regular file (remove it and "
                                               "start again to create a new token)",
                                               path, FileKind(st.st_mode)));
  if (st.st_uid != geteuid())
    return Status::InvalidArgument(fmt::format("the API token file {} is owned by {}, not by {} who runs elastrain; "
                                               "refusing a token another user could know (remove it, or run as its "
                                               "owner)",
                                               path, UserName(st.st_uid), UserName(geteuid())));
  if ((st.st_mode & 07777) != kTokenMode)
    return Status::InvalidArgument(fmt::format("the API token file {} has mode {:04o}; expected 0600 (readable by its "
                                               "owner only; other users may have read it: remove it to create a new "
                                               "token, or chmod 600 it if nobody else could)",
                                               path, st.st_mode & 07777));
  return Status::OK();
}

}  // namespace

Result<std::string> ReadTokenFile(const std::string& path) {
  const std::string what = "the API token file " + path;
  // O_NONBLOCK: a FIFO planted at the path must not block the open; fstat refuses it.
  UniqueFd f(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  bool mounted = false;
  if (f.get() < 0) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound(fmt::format("no API token file at {}", path));
    if (err != ELOOP) return Status::IOError(fmt::format("cannot open {}: {}", what, std::strerror(err)));
    // A link is followed only into a mounted secret (common/secret_file.h).
    f = UniqueFd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (f.get() < 0)
      return Status::IOError(fmt::format("cannot open {} (a symbolic link): {}", what, std::strerror(errno)));
    ELASTRAIN_ASSIGN_OR_RETURN(mounted, CheckMountedSecret(f.get(), what));
    if (!mounted) {
      return Status::InvalidArgument(fmt::format("{} is a symbolic link; expected a regular file (refusing to follow "
                                                 "it out of a read-only secret mount: remove the link)",
                                                 what));
    }
  } else {
    ELASTRAIN_ASSIGN_OR_RETURN(mounted, CheckMountedSecret(f.get(), what));
  }
  if (!mounted) ELASTRAIN_RETURN_IF_ERROR(CheckTrusted(path, f.get()));
  char buf[kTokenHexDigits + 3];
  size_t got = 0;
  while (got < sizeof(buf)) {
    const ssize_t n = read(f.get(), buf + got, sizeof(buf) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IOError(fmt::format("cannot read the API token file {}: {}", path, std::strerror(errno)));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  std::string_view t(buf, got);
  if (!t.empty() && t.back() == '\n') t.remove_suffix(1);
  if (!IsHexToken(t))
    return Status::InvalidArgument(fmt::format("the API token file {} does not hold a token ({} bytes; expected {} "
                                               "hex digits and a newline): remove it to create a new one",
                                               path, got, kTokenHexDigits));
  return std::string(t);
}

Result<std::string> EnsureTokenFile(const std::string& path) {
  auto existing = ReadTokenFile(path);
  if (existing.ok() || existing.status().code() != StatusCode::kNotFound) return existing;
  const std::string token = RandomHex(kTokenBytes);
  // Another process may win the race (or a link be planted): then its file is read.
  ELASTRAIN_ASSIGN_OR_RETURN(bool made, CreateFileExclusive(path, token + "\n", kTokenMode, "the API token file"));
  if (!made) return ReadTokenFile(path);
  return token;
}

Result<std::string> EnsureRunToken(const std::string& run_dir) {
  ELASTRAIN_RETURN_IF_ERROR(MakeDirs(run_dir));
  return EnsureTokenFile(run_dir + "/" + kTokenFileName);
}

Result<std::string> ReadRunToken(const std::string& run_dir) {
  return ReadTokenFile(run_dir + "/" + kTokenFileName);
}

std::string DefaultHeadTokenPath() {
  const char* home = std::getenv("HOME");
  if (!home || !*home) {
    const passwd* pw = getpwuid(geteuid());
    home = pw && pw->pw_dir ? pw->pw_dir : ".";
  }
  return (fs::path(home) / ".elastrain" / kHeadTokenFileName).string();
}

std::string DefaultHeadSigningKeyPath() {
  return (fs::path(DefaultHeadTokenPath()).parent_path() / "head_signing_key").string();
}

Result<std::string> EnsureHeadToken(const std::string& path) {
  const fs::path dir = fs::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    if (!dir.parent_path().empty()) fs::create_directories(dir.parent_path(), ec);
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return Status::IOError(fmt::format("cannot create the directory {} of the API token file: {}", dir.string(),
                                         std::strerror(errno)));
  }
  return EnsureTokenFile(path);
}

std::string UrlFileBeside(const std::string& token_path) {
  return (fs::path(token_path).parent_path() / kHeadUrlFileName).string();
}

Status WriteUrlFile(const std::string& path, const std::string& url) {
  // 0600: where the token goes is the owner's business (and nobody else's to read).
  return WriteFileAtomic(path, url + "\n", kUrlFileMode);
}

void RemoveUrlFile(const std::string& path, const std::string& url) {
  auto recorded = ReadFile(path);
  if (recorded.ok() && recorded.value() == url + "\n") unlink(path.c_str());
}

Result<std::string> ReadUrlFile(const std::string& path) {
  // Whoever can write this file chooses where the token goes: it must be ours and
  // writable by us only, and not a link.
  UniqueFd f(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (f.get() < 0) {
    if (errno == ENOENT) return Status::NotFound(fmt::format("no API URL recorded at {}", path));
    return Status::InvalidArgument(fmt::format("cannot read the API URL file {}: {}{}", path, std::strerror(errno),
                                               errno == ELOOP ? " (a symbolic link: refused)" : ""));
  }
  struct stat st {};
  if (fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022) != 0)
    return Status::InvalidArgument(fmt::format("the API URL file {} is not a regular file owned by {} and writable "
                                               "by its owner only; refusing to send a token where it points (remove "
                                               "it; the server writes it again when it starts)",
                                               path, UserName(geteuid())));
  std::string url(4096, '\0');
  const ssize_t n = read(f.get(), url.data(), url.size());
  url.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!url.empty() && (url.back() == '\n' || url.back() == '\r' || url.back() == ' ')) url.pop_back();
  if (url.empty()) return Status::NotFound(fmt::format("the API URL file {} is empty", path));
  return url;
}

bool BearerMatches(std::string_view authorization, std::string_view token) {
  static constexpr std::string_view kPrefix = "Bearer ";
  if (token.empty() || authorization.substr(0, kPrefix.size()) != kPrefix) return false;
  const std::string_view given = authorization.substr(kPrefix.size());
  if (given.size() != token.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < token.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ token[i]);
  return diff == 0;
}

}  // namespace elastrain
