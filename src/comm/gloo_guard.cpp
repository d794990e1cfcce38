// The connection guard (comm/gloo_guard.h) and the two libc calls it interposes.
//
// Interposition: this object file defines connect(2) and listen(2). An executable that
// links comm (and with it libgloo.so, which calls both) exports these definitions, and the
// dynamic linker resolves libgloo's calls to them before libc's. Both pass every call
// straight to the kernel unless the calling thread has an active guard: then listen gets
// the drop-everything filter first, and a connect to the zero address (only a masked Gloo
// pair address is ever that) is the guard's. If the interposition were not in effect,
// Gloo would connect to 0.0.0.0:0 and fail: the guard fails closed, never open.
#include "comm/gloo_guard.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/log.h"

namespace elastrain {

namespace {

thread_local ConnectionGuard* t_guard = nullptr;

constexpr char kRecordMagic[4] = {'E', 'G', 'R', '1'};
constexpr char kProofMagic[8] = {'E', 'L', 'G', 'U', 'A', 'R', 'D', '1'};
constexpr size_t kRecordSize = 4 + 4 + sizeof(sockaddr_storage) + 32;
constexpr size_t kChallengeSize = 8 + 4 + 32;  // magic, acceptor rank, nonce
constexpr size_t kResponseSize = 8 + 4 + 32;   // magic, dialer rank, mac
constexpr size_t kAckSize = 32;                // mac
// Gloo's tcp::Address as it publishes it: a sockaddr_storage and a sequence number.
constexpr size_t kGlooAddressSize = sizeof(sockaddr_storage) + sizeof(ssize_t);
constexpr std::chrono::milliseconds kSlice{50};
// Refusals logged one by one per guard; after that only counted (an attacker must not
// fill the log).
constexpr int kRefusalsLogged = 5;

void PutU32(unsigned char* p, uint32_t v) {
  p[0] = static_cast<unsigned char>(v >> 24);
  p[1] = static_cast<unsigned char>(v >> 16);
  p[2] = static_cast<unsigned char>(v >> 8);
  p[3] = static_cast<unsigned char>(v);
}
uint32_t GetU32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

bool IsZeroAddress(const sockaddr* addr, socklen_t len) {
  if (addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    return in->sin_port == 0 && in->sin_addr.s_addr == 0;
  }
  if (addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    return in6->sin6_port == 0 && IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr);
  }
  return false;
}

std::string AddressString(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
  }
  return fmt::format("{}:{}", host, port);
}

std::string PeerName(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "an unknown peer";
  return AddressString(ss);
}

}  // namespace

ConnectionGuard::ConnectionGuard(std::string prefix, int rank, int size, Clock::time_point deadline,
                                 std::function<bool()> cancelled)
    : prefix_(std::move(prefix)), rank_(rank), size_(size), deadline_(deadline), cancelled_(std::move(cancelled)),
      peers_(static_cast<size_t>(size)) {}

ConnectionGuard::~ConnectionGuard() {
  if (listener_ >= 0) ::close(listener_);
  for (Pending& p : pending_) ::close(p.fd);
  for (auto& [rank, fd] : proven_) ::close(fd);
}

Result<std::unique_ptr<ConnectionGuard>> ConnectionGuard::Open(const std::string& hostname, const std::string& prefix,
                                                               int rank, int size, Clock::time_point deadline,
                                                               std::function<bool()> cancelled) {
  std::unique_ptr<ConnectionGuard> g(new ConnectionGuard(prefix, rank, size, deadline, std::move(cancelled)));
  if (RAND_bytes(g->secret_.data(), static_cast<int>(g->secret_.size())) != 1)
    return Status::Internal("connection guard: no random bytes for the group's secret (OpenSSL RAND_bytes)");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rv = ::getaddrinfo(hostname.c_str(), nullptr, &hints, &res); rv != 0 || res == nullptr)
    return Status::InvalidArgument(fmt::format("connection guard: cannot resolve hostname '{}': {}", hostname,
                                               gai_strerror(rv)));
  std::memcpy(&g->listen_addr_, res->ai_addr, res->ai_addrlen);
  g->listen_len_ = res->ai_addrlen;
  const int family = res->ai_family;
  ::freeaddrinfo(res);
  g->listener_ = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (g->listener_ < 0) return Status::IOError(fmt::format("connection guard: socket: {}", std::strerror(errno)));
  if (::bind(g->listener_, reinterpret_cast<sockaddr*>(&g->listen_addr_), g->listen_len_) != 0 ||
      ::syscall(SYS_listen, g->listener_, static_cast<int>(size + kGuardMaxPending)) != 0)
    return Status::IOError(fmt::format("connection guard: cannot listen on '{}': {}", hostname, std::strerror(errno)));
  g->listen_len_ = sizeof(g->listen_addr_);
  ::getsockname(g->listener_, reinterpret_cast<sockaddr*>(&g->listen_addr_), &g->listen_len_);
  return g;
}

std::vector<char> ConnectionGuard::Record() const {
  std::vector<char> out(kRecordSize, 0);
  auto* p = reinterpret_cast<unsigned char*>(out.data());
  std::memcpy(p, kRecordMagic, 4);
  PutU32(p + 4, listen_len_);
  std::memcpy(p + 8, &listen_addr_, sizeof(listen_addr_));
  std::memcpy(p + 8 + sizeof(sockaddr_storage), secret_.data(), secret_.size());
  return out;
}

Status ConnectionGuard::AddPeer(int peer, const std::vector<char>& record) {
  const std::string key = RecordKey(peer);
  if (peer < 0 || peer >= size_ || peer == rank_)
    return Status::InvalidArgument(fmt::format("{}: rank {}: expected another rank of {}", key, peer, size_));
  const auto* p = reinterpret_cast<const unsigned char*>(record.data());
  if (record.size() != kRecordSize || std::memcmp(p, kRecordMagic, 4) != 0)
    return Status::Corruption(fmt::format("{}/{}: {} bytes: expected a {}-byte connection guard record", prefix_, key,
                                          record.size(), kRecordSize));
  Peer& r = peers_[static_cast<size_t>(peer)];
  r.addr_len = GetU32(p + 4);
  std::memcpy(&r.addr, p + 8, sizeof(r.addr));
  const bool v4 = r.addr.ss_family == AF_INET && r.addr_len == sizeof(sockaddr_in);
  const bool v6 = r.addr.ss_family == AF_INET6 && r.addr_len == sizeof(sockaddr_in6);
  if (!v4 && !v6)
    return Status::Corruption(fmt::format("{}/{}: address family {} of length {}: expected IPv4 or IPv6", prefix_, key,
                                          r.addr.ss_family, r.addr_len));
  std::memcpy(r.secret.data(), p + 8 + sizeof(sockaddr_storage), r.secret.size());
  r.known = true;
  return Status::OK();
}

std::vector<char> ConnectionGuard::MaskAddresses(const std::vector<char>& gloo_addresses) const {
  std::vector<char> out = gloo_addresses;
  if (size_ < 2 || out.size() != static_cast<size_t>(size_ - 1) * kGlooAddressSize) return out;
  for (size_t off = 0; off < out.size(); off += kGlooAddressSize) {
    // Keep the family (the first field) and the sequence number; zero address and port.
    std::memset(out.data() + off + sizeof(sa_family_t), 0, sizeof(sockaddr_storage) - sizeof(sa_family_t));
  }
  return out;
}

ConnectionGuard::Active::Active(ConnectionGuard* guard) { t_guard = guard; }
ConnectionGuard::Active::~Active() { t_guard = nullptr; }

int ConnectionGuard::Fail(int err, std::string why) {
  if (error_.empty()) error_ = std::move(why);
  errno = err;
  return -1;
}

int ConnectionGuard::OnListen(int fd, int backlog) {
  // Gloo's own listening socket of a pair: it will never be connected to (every pair
  // connects through the guard), so nothing may get in before Gloo closes it.
  sock_filter drop_all[] = {{BPF_RET | BPF_K, 0, 0, 0}};
  sock_fprog prog{1, drop_all};
  if (::setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) != 0)
    return Fail(errno, fmt::format("cannot filter a Gloo listening socket: {}", std::strerror(errno)));
  return static_cast<int>(::syscall(SYS_listen, fd, backlog));
}

namespace {

// Moves exactly `n` bytes on the non-blocking `fd` (reading when `in`), polling in slices
// until `deadline` or `cancelled`. Returns "" or why not.
std::string MoveExactly(int fd, unsigned char* buf, size_t n, bool in, std::chrono::steady_clock::time_point deadline,
                        const std::function<bool()>& cancelled) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = in ? ::recv(fd, buf + done, n - done, 0) : ::send(fd, buf + done, n - done, MSG_NOSIGNAL);
    if (r > 0) {
      done += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return "the peer closed the connection during the proof";
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return std::strerror(errno);
    if (cancelled && cancelled()) return "cancelled: the generation was aborted";
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return "timed out";
    const auto wait = std::min<std::chrono::steady_clock::duration>(kSlice, deadline - now);
    pollfd pfd{fd, static_cast<short>(in ? POLLIN : POLLOUT), 0};
    ::poll(&pfd, 1, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(wait).count()) + 1);
  }
  return "";
}

}  // namespace

std::array<unsigned char, 32> ConnectionGuard::Mac(const std::array<unsigned char, 32>& key, const char* label,
                                                   int dialer, int acceptor,
                                                   const std::array<unsigned char, 32>& nonce) const {
  std::vector<unsigned char> msg(label, label + std::strlen(label) + 1);
  msg.insert(msg.end(), prefix_.begin(), prefix_.end());
  msg.push_back(0);
  unsigned char ranks[8];
  PutU32(ranks, static_cast<uint32_t>(dialer));
  PutU32(ranks + 4, static_cast<uint32_t>(acceptor));
  msg.insert(msg.end(), ranks, ranks + 8);
  msg.insert(msg.end(), nonce.begin(), nonce.end());
  std::array<unsigned char, 32> out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), out.data(), &len);
  return out;
}

int ConnectionGuard::OnConnect(int fd, const sockaddr* /*addr*/, socklen_t /*len*/) {
  // connectFullMesh connects its pairs in rank order, skipping itself.
  if (next_peer_ == rank_) ++next_peer_;
  const int peer = next_peer_++;
  if (peer >= size_) return Fail(EPROTO, fmt::format("a pair connection beyond the group's {} ranks", size_));
  if (!peers_[static_cast<size_t>(peer)].known)
    return Fail(EPROTO, fmt::format("no connection guard record of rank {}", peer));
  const int rv = peer > rank_ ? Dial(fd, peer) : AcceptFrom(fd, peer);
  if (rv == 0) ++pairs_connected_;
  return rv;
}

int ConnectionGuard::Dial(int fd, int peer) {
  const Peer& p = peers_[static_cast<size_t>(peer)];
  const std::string to = fmt::format("rank {} at {}", peer, AddressString(p.addr));
  if (::syscall(SYS_connect, fd, reinterpret_cast<const sockaddr*>(&p.addr), p.addr_len) != 0 && errno != EINPROGRESS)
    return Fail(errno, fmt::format("connecting to {}: {}", to, std::strerror(errno)));
  // Gloo's socket is non-blocking: wait for the handshake, then prove ourselves.
  for (;;) {
    if (cancelled_ && cancelled_()) return Fail(ECANCELED, "cancelled: the generation was aborted");
    const auto now = Clock::now();
    if (now >= deadline_) return Fail(ETIMEDOUT, fmt::format("connecting to {}: timed out", to));
    pollfd pfd{fd, POLLOUT, 0};
    if (::poll(&pfd, 1, static_cast<int>(kSlice.count())) > 0) break;
  }
  int err = 0;
  socklen_t err_len = sizeof(err);
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len);
  if (err != 0) return Fail(err, fmt::format("connecting to {}: {}", to, std::strerror(err)));
  std::array<unsigned char, kChallengeSize> challenge{};
  if (auto why = MoveExactly(fd, challenge.data(), challenge.size(), true, deadline_, cancelled_); !why.empty())
    return Fail(ECONNABORTED, fmt::format("reading the nonce of {}: {}", to, why));
  if (std::memcmp(challenge.data(), kProofMagic, 8) != 0 || GetU32(challenge.data() + 8) != static_cast<uint32_t>(peer))
    return Fail(EPROTO, fmt::format("{} did not answer as rank {} of group '{}'", to, peer, prefix_));
  std::array<unsigned char, 32> nonce{};
  std::memcpy(nonce.data(), challenge.data() + 12, nonce.size());
  std::array<unsigned char, kResponseSize> response{};
  std::memcpy(response.data(), kProofMagic, 8);
  PutU32(response.data() + 8, static_cast<uint32_t>(rank_));
  const auto mac = Mac(p.secret, "dial", rank_, peer, nonce);
  std::memcpy(response.data() + 12, mac.data(), mac.size());
  if (auto why = MoveExactly(fd, response.data(), response.size(), false, deadline_, cancelled_); !why.empty())
    return Fail(ECONNABORTED, fmt::format("sending the proof to {}: {}", to, why));
  std::array<unsigned char, kAckSize> ack{};
  if (auto why = MoveExactly(fd, ack.data(), ack.size(), true, deadline_, cancelled_); !why.empty())
    return Fail(ECONNABORTED, fmt::format("reading the proof of {}: {}", to, why));
  const auto want = Mac(secret_, "accept", rank_, peer, nonce);
  if (CRYPTO_memcmp(ack.data(), want.data(), want.size()) != 0)
    return Fail(EPROTO, fmt::format("{} did not prove it is rank {} of group '{}'", to, peer, prefix_));
  return 0;
}

void ConnectionGuard::Refuse(Pending& p, const std::string& why) {
  ++refused_;
  if (refused_ <= kRefusalsLogged)
    LOG_WARN("comm: group '{}' rank {}: refused a connection from {} to its port: {}{}", prefix_, rank_, p.from, why,
             refused_ == kRefusalsLogged ? " (further refusals are only counted)" : "");
  ::close(p.fd);
  p.fd = -1;
}

void ConnectionGuard::TakeNew() {
  for (;;) {
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: none left (other errors: tried again on the next poll)
    Pending p;
    p.fd = fd;
    p.from = PeerName(fd);
    p.until = Clock::now() + kGuardProofTimeout;
    std::array<unsigned char, kChallengeSize> challenge{};
    std::memcpy(challenge.data(), kProofMagic, 8);
    PutU32(challenge.data() + 8, static_cast<uint32_t>(rank_));
    if (RAND_bytes(p.nonce.data(), static_cast<int>(p.nonce.size())) != 1) {
      Refuse(p, "no random bytes for a nonce");
      continue;
    }
    std::memcpy(challenge.data() + 12, p.nonce.data(), p.nonce.size());
    // A fresh socket's send buffer takes 44 bytes at once.
    if (::send(fd, challenge.data(), challenge.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(challenge.size())) {
      Refuse(p, "could not send it a nonce");
      continue;
    }
    if (pending_.size() >= kGuardMaxPending) {
      Refuse(pending_.front(), fmt::format("dropped: {} connections waiting to prove themselves", kGuardMaxPending));
      pending_.erase(pending_.begin());
    }
    pending_.push_back(std::move(p));
  }
}

bool ConnectionGuard::Serve(Pending& p) {
  unsigned char buf[kResponseSize];
  const size_t want = kResponseSize - p.got.size();
  const ssize_t r = ::recv(p.fd, buf, want, 0);
  if (r == 0) {
    Refuse(p, "it closed the connection without a proof");
    return true;
  }
  if (r < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
    Refuse(p, std::strerror(errno));
    return true;
  }
  p.got.insert(p.got.end(), buf, buf + r);
  if (p.got.size() < kResponseSize) return false;
  if (std::memcmp(p.got.data(), kProofMagic, 8) != 0) {
    Refuse(p, "its first bytes are not a connection proof");
    return true;
  }
  const uint32_t dialer = GetU32(p.got.data() + 8);
  if (dialer >= static_cast<uint32_t>(rank_)) {
    Refuse(p, fmt::format("it claims rank {}, not a lower rank of {}", dialer, size_));
    return true;
  }
  const int d = static_cast<int>(dialer);
  const auto expected = Mac(secret_, "dial", d, rank_, p.nonce);
  if (CRYPTO_memcmp(p.got.data() + 12, expected.data(), expected.size()) != 0) {
    Refuse(p, fmt::format("wrong proof for rank {} (it does not know the group's secret)", d));
    return true;
  }
  if (proven_.count(d) || d < next_peer_ - 1) {  // rank d's pair is already connected
    Refuse(p, fmt::format("rank {} has connected already (a replay?)", d));
    return true;
  }
  const auto ack = Mac(peers_[static_cast<size_t>(d)].secret, "accept", d, rank_, p.nonce);
  if (::send(p.fd, ack.data(), ack.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(ack.size())) {
    Refuse(p, "could not send it our proof");
    return true;
  }
  proven_[d] = p.fd;
  p.fd = -1;
  return true;
}

void ConnectionGuard::Close() {
  if (listener_ < 0) return;
  TakeNew();
  for (Pending& p : pending_)
    if (p.fd >= 0) Refuse(p, "no proof before the group was connected");
  pending_.clear();
  ::close(listener_);
  listener_ = -1;
}

int ConnectionGuard::AcceptFrom(int fd, int peer) {
  for (;;) {
    if (auto it = proven_.find(peer); it != proven_.end()) {
      // Gloo's socket becomes the proven connection; Gloo makes it non-blocking itself.
      const int conn = it->second;
      proven_.erase(it);
      const int rv = ::dup2(conn, fd);
      const int err = errno;
      ::close(conn);
      if (rv < 0) return Fail(err, fmt::format("moving rank {}'s connection onto Gloo's socket: {}", peer,
                                               std::strerror(err)));
      return 0;
    }
    if (cancelled_ && cancelled_()) return Fail(ECANCELED, "cancelled: the generation was aborted");
    const auto now = Clock::now();
    if (now >= deadline_)
      return Fail(ETIMEDOUT, fmt::format("rank {} did not connect and prove itself within the timeout", peer));
    TakeNew();
    std::vector<pollfd> fds{{listener_, POLLIN, 0}};
    auto until = std::min(deadline_, now + kSlice);
    for (const Pending& p : pending_) {
      fds.push_back({p.fd, POLLIN, 0});
      until = std::min(until, p.until);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
    ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(wait, 0)) + 1);
    const auto after = Clock::now();
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending& p = pending_[i];
      if (fds[i + 1].revents != 0 && Serve(p)) continue;  // proved or refused: fd handed on or closed
      if (p.fd >= 0 && after >= p.until)
        Refuse(p, fmt::format("no proof within {} ms", kGuardProofTimeout.count()));
    }
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](const Pending& p) { return p.fd < 0; }),
                   pending_.end());
  }
}

}  // namespace elastrain

// The interposed libc calls (see the top of this file). Same declarations as
// <sys/socket.h>, including listen's noexcept.
extern "C" int connect(int fd, const struct sockaddr* addr, socklen_t len) {
  if (elastrain::t_guard != nullptr && addr != nullptr && elastrain::IsZeroAddress(addr, len))
    return elastrain::t_guard->OnConnect(fd, addr, len);
  return static_cast<int>(::syscall(SYS_connect, fd, addr, len));
}

extern "C" int listen(int fd, int backlog) __THROW {
  if (elastrain::t_guard != nullptr) return elastrain::t_guard->OnListen(fd, backlog);
  return static_cast<int>(::syscall(SYS_listen, fd, backlog));
}
