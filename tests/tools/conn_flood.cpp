// conn_flood: the attacker of tests/integration/test_api_lockout.sh, holding many
// connections to an HTTP server without a token (bash cannot hold 2,000 sockets).
//   conn_flood PORT IDLE SLOW SLOW_INTERVAL_S SECONDS [READY_FILE]
// opens IDLE connections to 127.0.0.1:PORT that never send a byte and SLOW ones that send
// one byte of a request head every SLOW_INTERVAL_S seconds (never finishing it); every
// connection the server closes is counted and opened again (at most 500 a second, in
// rounds of 20 ms), so the pressure stays for SECONDS. Writes "ready" to READY_FILE once the first round is
// open, and at the end one line of figures:
//   flood: opened N (idle I, slow S), closed by the server C (idle CI, slow CS), connect
//   failures F, slow bytes sent B, held at the end H (idle HI, slow HS)
// Raises its own descriptor limit to the hard limit (the caller's `ulimit -n`).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Slot {
  bool slow = false;
  int fd = -1;
  size_t sent = 0;     // bytes of the head sent (slow)
  double next = 0;     // when to send the next byte (slow), or to reopen (closed)
};

const char kHead[] = "GET /api/v1/job HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: conn_flood slowloris 0123456789 "
                     "0123456789 0123456789 0123456789 0123456789 0123456789 0123456789 0123456789\r\n";

volatile std::sig_atomic_t g_stop = 0;

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: conn_flood PORT IDLE SLOW SLOW_INTERVAL_S SECONDS [READY_FILE]\n");
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const int idle = std::atoi(argv[2]), slow = std::atoi(argv[3]);
  const double interval = std::atof(argv[4]), seconds = std::atof(argv[5]);
  const std::string ready_file = argc > 6 ? argv[6] : "";
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGTERM, [](int) { g_stop = 1; });
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

  long opened = 0, opened_slow = 0, closed = 0, closed_slow = 0, failures = 0, bytes = 0;
  std::vector<Slot> slots(static_cast<size_t>(idle + slow));
  for (size_t i = 0; i < slots.size(); ++i) slots[i].slow = i >= static_cast<size_t>(idle);
  double reopen_budget = 0, last = Now();
  auto open = [&](Slot& s, double now) {
    s.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s.fd < 0 || (connect(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 && errno != EINPROGRESS)) {
      if (s.fd >= 0) close(s.fd);
      s.fd = -1;
      s.next = now + 0.5;
      ++failures;
      return;
    }
    s.sent = 0;
    s.next = now + (s.slow ? 0.05 : 0);
    ++opened;
    opened_slow += s.slow;
  };
  const double t0 = Now();
  for (Slot& s : slots) open(s, t0);
  if (!ready_file.empty()) std::ofstream(ready_file) << "ready\n";

  std::vector<pollfd> fds;
  std::vector<size_t> idx;
  while (!g_stop && Now() - t0 < seconds) {
    fds.clear();
    idx.clear();
    for (size_t i = 0; i < slots.size(); ++i)
      if (slots[i].fd >= 0) {
        fds.push_back({slots[i].fd, POLLIN, 0});
        idx.push_back(i);
      }
    // At most 50 rounds a second: the attacker shares the test machine's cores with the
    // server and the client it measures (its pressure is the reopen rate, not a busy loop).
    const double round_start = Now();
    poll(fds.data(), fds.size(), 50);
    const double spent = Now() - round_start;
    if (spent < 0.02) usleep(static_cast<useconds_t>((0.02 - spent) * 1e6));
    const double now = Now();
    reopen_budget = std::min(500.0, reopen_budget + (now - last) * 500);
    last = now;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      Slot& s = slots[idx[k]];
      char buf[4096];
      const ssize_t n = recv(s.fd, buf, sizeof(buf), 0);
      if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) continue;  // an answer; the close follows
      close(s.fd);
      s.fd = -1;
      s.next = now;
      ++closed;
      closed_slow += s.slow;
    }
    // The slow ones first: they are reopened before the idle ones take the round's budget.
    for (size_t k = 0; k < slots.size(); ++k) {
      Slot& s = slots[(k + static_cast<size_t>(idle)) % slots.size()];
      if (s.fd < 0) {
        if (now >= s.next && reopen_budget >= 1) {
          reopen_budget -= 1;
          open(s, now);
        }
      } else if (s.slow && now >= s.next) {
        const ssize_t n = send(s.fd, kHead + (s.sent % (sizeof(kHead) - 1)), 1, MSG_NOSIGNAL);
        if (n == 1) {
          ++s.sent;
          ++bytes;
        }
        s.next = now + interval;
      }
    }
  }
  long held = 0, held_slow = 0;
  for (const Slot& s : slots)
    if (s.fd >= 0) {
      ++held;
      held_slow += s.slow;
    }
  std::printf("flood: opened %ld (idle %ld, slow %ld), closed by the server %ld (idle %ld, slow %ld), connect failures "
              "%ld, slow bytes sent %ld, held at the end %ld (idle %ld, slow %ld)\n",
              opened, opened - opened_slow, opened_slow, closed, closed - closed_slow, closed_slow, failures, bytes,
              held, held - held_slow, held_slow);
  return 0;
}
