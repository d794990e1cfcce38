#include "wire/channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/log.h"

namespace elastrain {

Channel::Channel(int fd) : fd_(fd) {}

Channel::~Channel() {
  if (fd_ >= 0) ::close(fd_);
}

Status Channel::Send(const nlohmann::json& msg) {
  const std::string line = msg.dump() + "\n";
  std::lock_guard<std::mutex> lock(send_mu_);
  size_t off = 0;
  while (off < line.size()) {
    // MSG_NOSIGNAL: a dead peer gives EPIPE here instead of killing this process.
    ssize_t n = ::send(fd_, line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::Unavailable(std::string("channel closed (") + std::strerror(errno) + ")");
    off += static_cast<size_t>(n);
  }
  return Status::OK();
}

void Channel::TakeLines(std::vector<nlohmann::json>* out) {
  size_t start = 0;
  for (size_t nl; (nl = buf_.find('\n', start)) != std::string::npos; start = nl + 1) {
    auto j = nlohmann::json::parse(buf_.begin() + start, buf_.begin() + nl, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) out->push_back(std::move(j));
    else LOG_WARN("channel: dropped a malformed message: {}", buf_.substr(start, std::min<size_t>(nl - start, 120)));
  }
  buf_.erase(0, start);
}

Status Channel::ReadAvailable(std::vector<nlohmann::json>* out) {
  for (auto& m : pending_) out->push_back(std::move(m));
  pending_.clear();
  char chunk[65536];
  for (;;) {
    ssize_t n = ::recv(fd_, chunk, sizeof(chunk), MSG_DONTWAIT);
    const int err = errno;  // before TakeLines, which may change errno
    if (n > 0) {
      buf_.append(chunk, static_cast<size_t>(n));
      if (buf_.size() > kMaxChannelLine) {
        TakeLines(out);
        if (buf_.size() > kMaxChannelLine) {
          buf_.clear();
          return Status::Corruption(fmt::format("the peer sent a line longer than {} bytes; channel no longer read",
                                                 kMaxChannelLine));
        }
      }
      continue;
    }
    if (n < 0 && err == EINTR) continue;
    TakeLines(out);
    if (n == 0) return Status::Unavailable("channel closed by the peer");
    if (err == EAGAIN || err == EWOULDBLOCK) return Status::OK();
    return Status::Unavailable(std::string("channel read failed (") + std::strerror(err) + ")");
  }
}

Result<std::optional<nlohmann::json>> Channel::Receive(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pending_.empty()) {
      std::vector<nlohmann::json> got;
      Status st = ReadAvailable(&got);
      pending_ = std::move(got);
      if (!st.ok() && pending_.empty()) return st;
    }
    if (!pending_.empty()) {
      nlohmann::json m = std::move(pending_.front());
      pending_.erase(pending_.begin());
      return std::optional<nlohmann::json>(std::move(m));
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::optional<nlohmann::json>();
    pollfd p{fd_, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(left.count()));
  }
}

Result<std::pair<int, int>> MakeChannelPair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return Status::IOError(std::string("socketpair failed: ") + std::strerror(errno));
  return std::make_pair(fds[0], fds[1]);
}

}  // namespace elastrain
