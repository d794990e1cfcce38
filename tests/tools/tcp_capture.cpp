// tcp_capture: a fake HTTP server for the integration tests that records what clients
// send (no nc or python on a fresh machine).
//   tcp_capture PORT_FILE CAPTURE_FILE [SECONDS]
// listens on 127.0.0.1 at a free port, writes the port to PORT_FILE, appends every byte
// any client sends to CAPTURE_FILE, answers each connection `200 {}` once it has read
// the request head, and exits after SECONDS (default 120) or on SIGTERM.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: tcp_capture PORT_FILE CAPTURE_FILE [SECONDS]\n");
    return 2;
  }
  const int seconds = argc > 3 ? std::atoi(argv[3]) : 120;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd, 16) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("tcp_capture");
    return 1;
  }
  std::ofstream(argv[2], std::ios::app).flush();  // the file exists from the start
  std::ofstream(argv[1]) << ntohs(addr.sin_port) << "\n";
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    const int c = accept(fd, nullptr, nullptr);
    if (c < 0) continue;
    std::string got;
    char buf[4096];
    for (;;) {  // the request head, then whatever else arrives within 200 ms
      pollfd q{c, POLLIN, 0};
      if (poll(&q, 1, 200) <= 0) break;
      const ssize_t n = read(c, buf, sizeof(buf));
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    std::ofstream(argv[2], std::ios::app) << got;
    const char reply[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
    (void)!write(c, reply, sizeof(reply) - 1);
    close(c);
  }
  return 0;
}
