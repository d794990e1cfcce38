#include "monitor/http_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/log.h"
#include "common/signals.h"
#include "monitor/connection_ledger.h"
#include "monitor/request_guard.h"

namespace elastrain {

namespace {

thread_local const GateRequest* tls_current_request = nullptr;

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Milliseconds until `deadline`, for poll(): at most `slice`, at least 0.
int PollMillis(double deadline, double slice = 0.2) {
  const double left = std::min(deadline - Now(), slice);
  return left <= 0 ? 0 : static_cast<int>(left * 1000) + 1;
}

struct Conn {
  uint64_t id = 0;
  int fd = -1;
  SSL* ssl = nullptr;
  bool handshaken = false;
  bool want_write = false;  // the TLS handshake waits to write
  std::string peer;
  int port = 0;
  double accepted = 0;
  std::string buf;
  size_t drained = 0;  // body bytes read and discarded (a body the server refuses 413)

  ~Conn() {
    if (ssl) {
      if (handshaken) SSL_shutdown(ssl);  // best effort: the socket is non-blocking
      SSL_free(ssl);
    }
    if (fd >= 0) ::close(fd);
  }
};

std::string PeerText(const sockaddr_storage& addr, int* port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    *port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    *port = ntohs(a->sin6_port);
  } else {
    return "unknown";
  }
  return text;
}

// A connection being answered, as httplib reads and writes it: the bytes the gate read
// first, then the socket, each read until the request's deadline and each write until
// the answer's.
class GateStream : public httplib::Stream {
 public:
  GateStream(Conn& c, double read_deadline, double write_deadline, const std::atomic<bool>& stopping)
      : c_(c), read_deadline_(read_deadline), write_deadline_(write_deadline), stopping_(stopping) {}

  bool is_readable() const override {
    return pos_ < c_.buf.size() || zeros_ < c_.drained || (c_.ssl && SSL_pending(c_.ssl) > 0) ||
           Wait(POLLIN, read_deadline_);
  }
  bool is_writable() const override { return Wait(POLLOUT, write_deadline_); }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ < c_.buf.size()) {
      const size_t n = std::min(size, c_.buf.size() - pos_);
      std::memcpy(ptr, c_.buf.data() + pos_, n);
      pos_ += n;
      return static_cast<ssize_t>(n);
    }
    if (zeros_ < c_.drained) {  // the discarded body, which is only ever skipped
      const size_t n = std::min(size, c_.drained - zeros_);
      std::memset(ptr, 0, n);
      zeros_ += n;
      return static_cast<ssize_t>(n);
    }
    for (;;) {
      if (c_.ssl) {
        const int n = SSL_read(c_.ssl, ptr, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
        if (n > 0) return n;
        const int err = SSL_get_error(c_.ssl, n);
        if (err == SSL_ERROR_WANT_READ ? !Wait(POLLIN, read_deadline_)
                                       : err == SSL_ERROR_WANT_WRITE ? !Wait(POLLOUT, read_deadline_) : true)
          return -1;
      } else {
        const ssize_t n = ::recv(c_.fd, ptr, size, 0);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        if ((errno != EAGAIN && errno != EWOULDBLOCK) || !Wait(POLLIN, read_deadline_)) return -1;
      }
    }
  }

  ssize_t write(const char* ptr, size_t size) override {
    for (;;) {
      if (c_.ssl) {
        const int n = SSL_write(c_.ssl, ptr, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
        if (n > 0) return n;
        const int err = SSL_get_error(c_.ssl, n);
        if (err == SSL_ERROR_WANT_WRITE ? !Wait(POLLOUT, write_deadline_)
                                        : err == SSL_ERROR_WANT_READ ? !Wait(POLLIN, write_deadline_) : true)
          return -1;
      } else {
        const ssize_t n = ::send(c_.fd, ptr, size, MSG_NOSIGNAL);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        if ((errno != EAGAIN && errno != EWOULDBLOCK) || !Wait(POLLOUT, write_deadline_)) return -1;
      }
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.peer;
    port = c_.port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    port = 0;
    if (::getsockname(c_.fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) ip = PeerText(addr, &port);
  }
  socket_t socket() const override { return c_.fd; }

 private:
  // Waits for the socket to be ready for `events` until `deadline` (or Stop).
  bool Wait(short events, double deadline) const {
    for (;;) {
      if (stopping_.load() || Now() >= deadline) return false;
      pollfd p{c_.fd, events, 0};
      const int r = ::poll(&p, 1, PollMillis(deadline));
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) return false;
    }
  }

  Conn& c_;
  size_t pos_ = 0;
  size_t zeros_ = 0;
  const double read_deadline_, write_deadline_;
  const std::atomic<bool>& stopping_;
};

// What a waiting connection's bytes amount to.
enum class Arrival { kWaiting, kComplete, kTooLarge, kGone };

}  // namespace

const GateRequest* CurrentGateRequest() { return tls_current_request; }

class HttpGate::Impl {
 public:
  Impl(GateLimits& limits, Handler handler) : limits_(limits), handler_(std::move(handler)), ledger_(1, 1) {}
  ~Impl() {
    Stop();
    if (ctx_) SSL_CTX_free(ctx_);
  }

  Status SetTls(const std::string& cert, const std::string& key) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) return Status::Internal("cannot create an OpenSSL context");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
      ERR_clear_error();
      SSL_CTX_free(ctx);
      return Status::InvalidArgument(fmt::format("cannot load the TLS certificate {} with the key {} (expected PEM "
                                                 "files, the key matching the certificate)",
                                                 cert, key));
    }
    if (ctx_) SSL_CTX_free(ctx_);
    ctx_ = ctx;
    IgnoreSigpipeOnce();  // OpenSSL writes with write(2): a client gone must be EPIPE, not a kill
    return Status::OK();
  }

  Result<int> Listen(const std::string& host, int port);
  void Serve();
  void Stop();
  GateCounters Counters() {
    std::lock_guard<std::mutex> lock(mu_);
    return counters_;
  }

 private:
  void Loop();
  void Work();
  void AcceptSome(double now);
  Arrival ReadSome(Conn& c);
  void Close(uint64_t id, uint64_t GateCounters::*counter, const std::string& why);
  void NoteClosed(const std::string& why);  // the rate-limited summary line
  void Dispatch(uint64_t id);

  GateLimits& limits_;
  Handler handler_;
  SSL_CTX* ctx_ = nullptr;
  int listen_fd_ = -1, wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread loop_;
  std::vector<std::thread> workers_;
  uint64_t next_id_ = 1;
  double accept_paused_until_ = 0;
  std::map<uint64_t, std::unique_ptr<Conn>> waiting_;  // the loop thread's only

  std::mutex mu_;
  std::condition_variable ready_cv_;
  ConnectionLedger ledger_;                     // GUARDED_BY(mu_)
  std::deque<std::unique_ptr<Conn>> ready_;     // GUARDED_BY(mu_)
  GateCounters counters_;                       // GUARDED_BY(mu_)
  double summary_start_ = 0;                    // GUARDED_BY(mu_)
  uint64_t summary_closed_ = 0;                 // GUARDED_BY(mu_)
  std::string summary_last_;                    // GUARDED_BY(mu_)
};

Result<int> HttpGate::Impl::Listen(const std::string& host, int port) {
  if (listen_fd_ >= 0) return Status::FailedPrecondition("the API gate is already listening");
  // The caps stay well below the descriptor limit (the store, the run's files and the
  // workers' channels need theirs).
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY)
    limits_.max_connections = std::min<size_t>(limits_.max_connections, std::max<size_t>(nofile.rlim_cur / 4, 8));
  limits_.max_per_peer = std::clamp<size_t>(limits_.max_per_peer, 1, std::max<size_t>(limits_.max_connections / 2, 1));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ledger_ = ConnectionLedger(limits_.max_connections, limits_.max_per_peer);
  }

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int gai = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (gai != 0)
    return Status::Unavailable(fmt::format("cannot listen on {}:{}: {}", host, port, ::gai_strerror(gai)));
  std::string why = "no address";
  for (addrinfo* a = res; a && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      listen_fd_ = fd;
      break;
    }
    why = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0)
    return Status::Unavailable(fmt::format("cannot listen on {}:{}: {} (in use, or not a local address)", host, port,
                                           why));
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  int bound_port = port;
  if (::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len) == 0) PeerText(bound, &bound_port);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  stopping_ = false;
  return bound_port;
}

void HttpGate::Impl::Serve() {
  if (listen_fd_ < 0 || loop_.joinable()) return;
  loop_ = std::thread([this] { Loop(); });
  for (int i = 0; i < std::max(1, limits_.workers); ++i) workers_.emplace_back([this] { Work(); });
}

void HttpGate::Impl::Stop() {
  if (listen_fd_ < 0) return;
  stopping_ = true;
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  }
  ready_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  for (std::thread& t : workers_)
    if (t.joinable()) t.join();
  workers_.clear();
  waiting_.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.clear();
  }
  ::close(listen_fd_);
  listen_fd_ = -1;
  if (wake_fd_ >= 0) ::close(wake_fd_);
  wake_fd_ = -1;
}

void HttpGate::Impl::NoteClosed(const std::string& why) {
  // mu_ held. One line per 10 s at most: a flood of connections cannot fill the log.
  const double now = Now();
  ++summary_closed_;
  summary_last_ = why;
  if (now - summary_start_ < 10) return;
  LOG_WARN("api: closed {} connection(s) in the last {:.0f} s (totals: {} refused, {} closed to make room, {} past the "
           "{:.0f} s request deadline, {} heads over {} bytes; caps {} connections, {} per address); the last: {}",
           summary_closed_, summary_start_ == 0 ? 0.0 : now - summary_start_, counters_.refused, counters_.evicted,
           counters_.timed_out, limits_.request_seconds, counters_.too_large, limits_.max_head_bytes,
           limits_.max_connections, limits_.max_per_peer, summary_last_);
  summary_start_ = now;
  summary_closed_ = 0;
}

void HttpGate::Impl::Close(uint64_t id, uint64_t GateCounters::*counter, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ledger_.Closed(id);
    ++(counters_.*counter);
    NoteClosed(why);
  }
  waiting_.erase(id);
}

void HttpGate::Impl::AcceptSome(double now) {
  for (int i = 0; i < 256; ++i) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors all the same (the rest of the process holds them): make
        // room by closing the least active waiting connection, or wait a little.
        uint64_t victim;
        {
          std::lock_guard<std::mutex> lock(mu_);
          victim = ledger_.Victim();
        }
        if (victim != 0) {
          Close(victim, &GateCounters::evicted,
                fmt::format("out of file descriptors ({}): the least active waiting connection closed",
                            std::strerror(errno)));
          continue;
        }
        accept_paused_until_ = now + 0.05;
      }
      return;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->id = next_id_++;
    c->accepted = now;
    c->peer = PeerText(addr, &c->port);
    ConnectionLedger::Decision d;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counters_.accepted;
      d = ledger_.Admit(c->id, c->peer, now);
      if (d.evict != 0) {
        ++counters_.evicted;
        NoteClosed(d.reason);
      }
      if (!d.admit) {
        ++counters_.refused;
        NoteClosed(d.reason);
      }
    }
    if (d.evict != 0) waiting_.erase(d.evict);
    if (!d.admit) continue;  // c closes
    if (ctx_) {
      c->ssl = SSL_new(ctx_);
      if (!c->ssl || SSL_set_fd(c->ssl, fd) != 1) {
        Close(c->id, &GateCounters::refused, "cannot create a TLS session");
        continue;
      }
    }
    waiting_[c->id] = std::move(c);
  }
}

Arrival HttpGate::Impl::ReadSome(Conn& c) {
  char chunk[16384];
  size_t got = 0;
  bool eof = false;  // the client closed its side: what it sent may still be a whole request
  for (;;) {
    if (c.ssl) {
      if (!c.handshaken) {
        const int r = SSL_accept(c.ssl);
        if (r == 1) {
          c.handshaken = true;
          c.want_write = false;
          continue;
        }
        const int err = SSL_get_error(c.ssl, r);
        ERR_clear_error();
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
          c.want_write = err == SSL_ERROR_WANT_WRITE;
          break;
        }
        return Arrival::kGone;
      }
      const int n = SSL_read(c.ssl, chunk, sizeof(chunk));
      if (n > 0) {
        c.buf.append(chunk, static_cast<size_t>(n));
        got += static_cast<size_t>(n);
      } else {
        const int err = SSL_get_error(c.ssl, n);
        ERR_clear_error();
        if (err == SSL_ERROR_WANT_READ) break;
        return Arrival::kGone;
      }
    } else {
      const ssize_t n = ::recv(c.fd, chunk, sizeof(chunk), 0);
      if (n > 0) {
        c.buf.append(chunk, static_cast<size_t>(n));
        got += static_cast<size_t>(n);
      } else if (n == 0) {
        eof = true;
        break;
      } else if (errno == EINTR) {
        continue;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        break;
      } else {
        return Arrival::kGone;
      }
    }
    if (c.buf.size() > limits_.max_head_bytes + limits_.max_buffered_body) break;
  }
  if (got > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    ledger_.Progress(c.id, Now());
  }
  const Arrival more = eof ? Arrival::kGone : Arrival::kWaiting;  // when the request is not whole yet
  const size_t head_end = RequestHeadEnd(c.buf);
  if (head_end == std::string::npos)
    return c.buf.size() > limits_.max_head_bytes ? Arrival::kTooLarge : more;
  if (head_end > limits_.max_head_bytes) return Arrival::kTooLarge;
  // A body the gate reads too: declared by Content-Length, within max_buffered_body,
  // and not waiting for "100 Continue". Anything else goes on with its head (httplib
  // and the API's pre-routing answer it, reading within the same deadline).
  const std::string_view head(c.buf.data(), head_end);
  if (RawHeaderValue(head, "Transfer-Encoding") || RawHeaderValue(head, "Expect")) return Arrival::kComplete;
  const auto length = RawHeaderValue(head, "Content-Length");
  if (!length) return Arrival::kComplete;
  size_t declared = 0;
  const auto [end, ec] = std::from_chars(length->data(), length->data() + length->size(), declared);
  if (ec != std::errc() || end != length->data() + length->size() ||
      declared > std::max(limits_.max_buffered_body, limits_.max_drained_body))
    return Arrival::kComplete;
  if (declared > limits_.max_buffered_body) {  // to be refused: read, but not kept
    c.drained += c.buf.size() - head_end;
    c.buf.resize(head_end);
    if (c.drained > declared) c.drained = declared;  // bytes past the body are never read
    return c.drained >= declared ? Arrival::kComplete : more;
  }
  return c.buf.size() >= head_end + declared ? Arrival::kComplete : more;
}

void HttpGate::Impl::Dispatch(uint64_t id) {
  auto it = waiting_.find(id);
  if (it == waiting_.end()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ledger_.Answering(id);
    ++counters_.answered;
    ready_.push_back(std::move(it->second));
  }
  waiting_.erase(it);
  ready_cv_.notify_one();
}

void HttpGate::Impl::Loop() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  while (!stopping_) {
    double now = Now();
    fds.clear();
    ids.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    const bool accepting = now >= accept_paused_until_;
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    for (const auto& [id, c] : waiting_) {
      fds.push_back({c->fd, static_cast<short>(c->want_write ? POLLOUT : POLLIN), 0});
      ids.push_back(id);
    }
    const int r = ::poll(fds.data(), fds.size(), accepting ? 100 : 50);
    if (r < 0 && errno != EINTR) {
      LOG_WARN("api: poll failed ({}); the API stops accepting", std::strerror(errno));
      return;
    }
    if (stopping_) return;
    now = Now();
    // Requests first: a client that sent its request is served before new connections
    // (the attacker's, in a flood) are taken in.
    for (size_t i = 0; i < ids.size(); ++i) {
      if (fds[i + 2].revents == 0) continue;
      auto it = waiting_.find(ids[i]);
      if (it == waiting_.end()) continue;  // closed to make room meanwhile
      Conn& c = *it->second;
      switch (ReadSome(c)) {
        case Arrival::kWaiting:
          break;
        case Arrival::kComplete:
          Dispatch(c.id);
          break;
        case Arrival::kTooLarge: {
          static constexpr char k431[] =
              "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
          if (c.ssl) SSL_write(c.ssl, k431, sizeof(k431) - 1);
          else [[maybe_unused]] ssize_t n = ::send(c.fd, k431, sizeof(k431) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
          Close(c.id, &GateCounters::too_large,
                fmt::format("request head from {} over {} bytes (HTTP 431): '{}'", c.peer, limits_.max_head_bytes,
                            EscapeForLog(RequestLine(c.buf), 120)));
          break;
        }
        case Arrival::kGone: {
          std::lock_guard<std::mutex> lock(mu_);
          ledger_.Closed(c.id);
          waiting_.erase(it);
          break;
        }
      }
    }
    if (accepting && (fds[1].revents & POLLIN)) AcceptSome(now);
    std::vector<uint64_t> expired;
    {
      std::lock_guard<std::mutex> lock(mu_);
      expired = ledger_.Expired(now, limits_.request_seconds);
    }
    for (uint64_t id : expired) {
      auto it = waiting_.find(id);
      const std::string peer = it == waiting_.end() ? "?" : it->second->peer;
      const size_t bytes = it == waiting_.end() ? 0 : it->second->buf.size();
      Close(id, &GateCounters::timed_out,
            fmt::format("a connection from {} sent {} byte(s) and no complete request in {:.0f} s", peer, bytes,
                        limits_.request_seconds));
    }
  }
}

void HttpGate::Impl::Work() {
  for (;;) {
    std::unique_ptr<Conn> c;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_cv_.wait(lock, [&] { return stopping_.load() || !ready_.empty(); });
      if (stopping_) return;
      c = std::move(ready_.front());
      ready_.pop_front();
    }
    GateStream stream(*c, c->accepted + limits_.request_seconds, Now() + limits_.answer_seconds, stopping_);
    const GateRequest info{c->peer, c->port, std::string(RequestLine(c->buf).substr(0, 8192))};
    tls_current_request = &info;
    try {
      handler_(stream);
    } catch (const std::exception& e) {
      LOG_WARN("api: answering {} from {}: {}", EscapeForLog(info.first_line, 120), info.peer, e.what());
    } catch (...) {
      LOG_WARN("api: answering {} from {}: unknown exception", EscapeForLog(info.first_line, 120), info.peer);
    }
    tls_current_request = nullptr;
    const uint64_t id = c->id;
    if (!c->ssl) ::shutdown(c->fd, SHUT_WR);
    c.reset();
    std::lock_guard<std::mutex> lock(mu_);
    ledger_.Closed(id);
  }
}

HttpGate::HttpGate(GateLimits limits, Handler handler)
    : limits_(limits), impl_(std::make_unique<Impl>(limits_, std::move(handler))) {}
HttpGate::~HttpGate() = default;
Status HttpGate::SetTls(const std::string& cert_file, const std::string& key_file) {
  return impl_->SetTls(cert_file, key_file);
}
Result<int> HttpGate::Listen(const std::string& host, int port) { return impl_->Listen(host, port); }
void HttpGate::Serve() { impl_->Serve(); }
void HttpGate::Stop() { impl_->Stop(); }
GateCounters HttpGate::Counters() const { return impl_->Counters(); }

}  // namespace elastrain
