// net_relay: a user-space Ethernet relay between two interfaces that adds latency and
// random loss, each direction on its own. It stands in for netem (the kernels the tests
// run on may have no netem qdisc and no tc actions) in tests/cluster/netns_lib.sh's
// host_shape, which runs it in the test's switch namespace between a host's veth and
// the bridge.
//   net_relay --a IF_A --b IF_B [--delay-ms-ab N] [--delay-ms-ba N]
//             [--loss-ab P] [--loss-ba P] [--seed S]
// Every frame seen arriving on IF_A goes out on IF_B N ms later unless dropped with
// probability P percent (and the same from IF_B to IF_A with the ba settings). Frames
// keep their order within a direction. Prints one "net_relay: relaying ..." line on
// stdout once both sockets are bound (the caller waits for it), counts on stderr at the
// end, and exits 0 on SIGTERM or SIGINT.
//
// Frames must be whole, checksummed Ethernet frames of at most the MTU: a raw socket
// hands over what the sender's stack left, so a sender with checksum or segmentation
// offload on (veth's default) would pass frames that the receiver drops or that cannot be
// sent. netns_lib.sh turns those offloads off with ethtool; the relay says so, once per
// interface, when it meets such a frame.
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Frames larger than this cannot come from a veth (GSO frames are at most 64 KiB).
constexpr size_t kMaxFrame = 65536;
// A queue's bound, like a router's buffer: past it frames are dropped, so a flood at a
// long delay cannot grow the relay without limit.
constexpr size_t kMaxQueuedBytes = 32u << 20;
// At most this many frames are read from one socket per wake-up, so a busy direction
// cannot starve the other or the sends that are due.
constexpr int kMaxReadsPerWake = 256;

volatile sig_atomic_t g_stop = 0;
void OnStop(int) { g_stop = 1; }

struct Side {
  std::string name;
  int fd = -1;
};

struct Frame {
  Clock::time_point due;
  std::vector<unsigned char> bytes;
};

struct Direction {
  std::string label;  // "a->b" or "b->a"
  Side* from = nullptr;
  Side* to = nullptr;
  Clock::duration delay{};
  double loss = 0;  // fraction 0..1
  std::deque<Frame> queue;
  size_t queued_bytes = 0;
  unsigned long long forwarded = 0, lost = 0, overflow = 0, send_failed = 0;
  std::set<int> reported_errors;  // each send errno is reported once
  bool warned_checksum = false, warned_size = false;
};

// Opens a raw socket that sees every frame on IF (promiscuous) and sends out of it.
// Exits with a message naming IF when that fails.
Side OpenSide(const std::string& name) {
  Side s;
  s.name = name;
  const unsigned index = if_nametoindex(name.c_str());
  if (index == 0) {
    std::fprintf(stderr, "net_relay: no interface %s here: %s\n", name.c_str(), std::strerror(errno));
    std::exit(1);
  }
  // Protocol 0 at creation, ETH_P_ALL at bind: the socket sees nothing from the other
  // interfaces in between.
  s.fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s.fd < 0) {
    std::fprintf(stderr, "net_relay: raw socket for %s: %s (needs CAP_NET_RAW)\n", name.c_str(),
                 std::strerror(errno));
    std::exit(1);
  }
  sockaddr_ll addr{};
  addr.sll_family = AF_PACKET;
  addr.sll_protocol = htons(ETH_P_ALL);
  addr.sll_ifindex = static_cast<int>(index);
  packet_mreq promisc{};
  promisc.mr_ifindex = static_cast<int>(index);
  promisc.mr_type = PACKET_MR_PROMISC;
  const int on = 1, buffer = 4 << 20;
  if (bind(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      setsockopt(s.fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &promisc, sizeof(promisc)) != 0 ||
      setsockopt(s.fd, SOL_PACKET, PACKET_AUXDATA, &on, sizeof(on)) != 0) {
    std::fprintf(stderr, "net_relay: binding to %s: %s\n", name.c_str(), std::strerror(errno));
    std::exit(1);
  }
  // Room for a burst while the relay sleeps; the default (~200 KiB) drops TCP bursts.
  setsockopt(s.fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
  return s;
}

// Reads the frames waiting on dir.from and queues them (or drops them) for dir.to.
void Receive(Direction& dir, std::mt19937_64& rng) {
  static unsigned char buf[kMaxFrame];
  std::bernoulli_distribution drop(dir.loss);
  for (int i = 0; i < kMaxReadsPerWake; i++) {
    sockaddr_ll from{};
    alignas(cmsghdr) unsigned char control[CMSG_SPACE(sizeof(tpacket_auxdata))];
    iovec iov{buf, sizeof(buf)};
    msghdr msg{};
    msg.msg_name = &from;
    msg.msg_namelen = sizeof(from);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(dir.from->fd, &msg, MSG_TRUNC | MSG_DONTWAIT);
    if (n < 0) {
      // ENETDOWN: the interface went down (host_cut); it is reported once on the socket,
      // and the relay carries on for when it comes back.
      if (errno != EAGAIN && errno != EINTR && errno != ENETDOWN)
        std::fprintf(stderr, "net_relay: reading %s: %s\n", dir.from->name.c_str(), std::strerror(errno));
      return;
    }
    // Our own sends show up as outgoing on the socket of the interface they leave by;
    // relaying them back would loop.
    if (from.sll_pkttype == PACKET_OUTGOING) continue;
    if (static_cast<size_t>(n) > sizeof(buf)) {
      if (!dir.warned_size)
        std::fprintf(stderr, "net_relay: a %zd-byte frame on %s is larger than %zu bytes; dropped\n", n,
                     dir.from->name.c_str(), sizeof(buf));
      dir.warned_size = true;
      dir.send_failed++;
      continue;
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_PACKET || c->cmsg_type != PACKET_AUXDATA) continue;
      tpacket_auxdata aux;
      std::memcpy(&aux, CMSG_DATA(c), sizeof(aux));
      if ((aux.tp_status & TP_STATUS_CSUMNOTREADY) && !dir.warned_checksum) {
        std::fprintf(stderr,
                     "net_relay: a frame on %s has its checksum left to offload; the receiver will "
                     "drop it (turn offloads off at the sender: ethtool -K IF tx off tso off gso off)\n",
                     dir.from->name.c_str());
        dir.warned_checksum = true;
      }
    }
    if (drop(rng)) {
      dir.lost++;
      continue;
    }
    if (dir.queued_bytes + static_cast<size_t>(n) > kMaxQueuedBytes) {
      dir.overflow++;
      continue;
    }
    dir.queue.push_back({Clock::now() + dir.delay, std::vector<unsigned char>(buf, buf + n)});
    dir.queued_bytes += static_cast<size_t>(n);
  }
}

// Sends the frames of dir whose time has come, oldest first.
void SendDue(Direction& dir, Clock::time_point now) {
  while (!dir.queue.empty() && dir.queue.front().due <= now) {
    const Frame& f = dir.queue.front();
    // Never blocks: a full device queue drops the frame, as a congested link would.
    if (send(dir.to->fd, f.bytes.data(), f.bytes.size(), MSG_DONTWAIT) >= 0) {
      dir.forwarded++;
    } else {
      dir.send_failed++;
      // Down (host_cut) or busy is expected; anything else is worth one line.
      const int e = errno;
      if (e != ENETDOWN && e != ENXIO && e != EAGAIN && e != ENOBUFS && dir.reported_errors.insert(e).second)
        std::fprintf(stderr, "net_relay: sending a %zu-byte frame on %s: %s\n", f.bytes.size(),
                     dir.to->name.c_str(), std::strerror(e));
    }
    dir.queued_bytes -= f.bytes.size();
    dir.queue.pop_front();
  }
}

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "net_relay: %s\nusage: net_relay --a IF_A --b IF_B [--delay-ms-ab N] [--delay-ms-ba N] "
               "[--loss-ab PERCENT] [--loss-ba PERCENT] [--seed S]\n",
               why);
  std::exit(2);
}

// A number in [lo, hi], or usage.
double Number(const std::string& flag, const char* text, double lo, double hi) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(v >= lo && v <= hi)) {
    char why[256];
    std::snprintf(why, sizeof(why), "%s wants a number from %g to %g, got '%s'", flag.c_str(), lo, hi, text);
    Usage(why);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string if_a, if_b;
  double delay_ab = 0, delay_ba = 0, loss_ab = 0, loss_ba = 0;
  unsigned long long seed = std::random_device{}();
  for (int i = 1; i < argc; i++) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage((flag + " needs a value").c_str());
    const char* value = argv[++i];
    if (flag == "--a") if_a = value;
    else if (flag == "--b") if_b = value;
    else if (flag == "--delay-ms-ab") delay_ab = Number(flag, value, 0, 60000);
    else if (flag == "--delay-ms-ba") delay_ba = Number(flag, value, 0, 60000);
    else if (flag == "--loss-ab") loss_ab = Number(flag, value, 0, 100);
    else if (flag == "--loss-ba") loss_ba = Number(flag, value, 0, 100);
    else if (flag == "--seed") seed = static_cast<unsigned long long>(Number(flag, value, 0, 1e15));
    else Usage(("unknown flag " + flag).c_str());
  }
  if (if_a.empty() || if_b.empty()) Usage("--a and --b are required");
  if (if_a == if_b) Usage("--a and --b must be two interfaces");

  // SIGTERM and SIGINT are blocked except inside ppoll, so a stop request is seen at the
  // next wait and never lost between the check and the wait.
  struct sigaction sa{};
  sa.sa_handler = OnStop;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigset_t stops, waiting;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  sigprocmask(SIG_BLOCK, &stops, &waiting);
  sigdelset(&waiting, SIGTERM);
  sigdelset(&waiting, SIGINT);

  Side a = OpenSide(if_a), b = OpenSide(if_b);
  auto ms = [](double v) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(v)); };
  Direction dirs[2];  // dirs[0] reads a's socket, dirs[1] b's
  dirs[0].label = "a->b", dirs[0].from = &a, dirs[0].to = &b, dirs[0].delay = ms(delay_ab), dirs[0].loss = loss_ab / 100;
  dirs[1].label = "b->a", dirs[1].from = &b, dirs[1].to = &a, dirs[1].delay = ms(delay_ba), dirs[1].loss = loss_ba / 100;
  std::mt19937_64 rng(seed);
  std::printf("net_relay: relaying %s <-> %s (%s->%s: delay %g ms, loss %g%%; %s->%s: delay %g ms, loss %g%%; seed %llu)\n",
              a.name.c_str(), b.name.c_str(), a.name.c_str(), b.name.c_str(), delay_ab, loss_ab, b.name.c_str(),
              a.name.c_str(), delay_ba, loss_ba, seed);
  std::fflush(stdout);

  while (!g_stop) {
    const auto now = Clock::now();
    for (Direction& d : dirs) SendDue(d, now);
    // Sleep until the next frame is due, at most a second.
    auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::seconds(1));
    for (Direction& d : dirs)
      if (!d.queue.empty())
        wait = std::min(wait, std::max(std::chrono::nanoseconds(0),
                                       std::chrono::duration_cast<std::chrono::nanoseconds>(d.queue.front().due - now)));
    const timespec ts{static_cast<time_t>(wait.count() / 1000000000), static_cast<long>(wait.count() % 1000000000)};
    pollfd fds[2] = {{a.fd, POLLIN, 0}, {b.fd, POLLIN, 0}};
    const int ready = ppoll(fds, 2, &ts, &waiting);
    if (ready < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "net_relay: poll: %s\n", std::strerror(errno));
      return 1;
    }
    for (int i = 0; i < 2; i++) {
      if (fds[i].revents & POLLERR) {
        // The socket's pending error (ENETDOWN when the link went down); taking it clears it.
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(fds[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (if_nametoindex(dirs[i].from->name.c_str()) == 0) {
          std::fprintf(stderr, "net_relay: interface %s is gone; stopping\n", dirs[i].from->name.c_str());
          return 1;
        }
      }
      if (fds[i].revents & POLLIN) Receive(dirs[i], rng);
    }
  }
  for (const Direction& d : dirs)
    std::fprintf(stderr, "net_relay: %s %s->%s: %llu forwarded, %llu lost (random), %llu over the queue bound, %llu not sent\n",
                 d.label.c_str(), d.from->name.c_str(), d.to->name.c_str(), d.forwarded, d.lost, d.overflow,
                 d.send_failed);
  return 0;
}
