#include "launch/master_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include <fmt/format.h>
#include <gloo/rendezvous/store.h>

#include "comm/rendezvous_store.h"  // MakeFileStore, MakeGlooStore
#include "common/clock.h"
#include "store/store.h"
#include "wire/protocol.h"

namespace elastrain {

namespace {

// The port of a free socket on `address`, 0 when none could be had.
int FreePort(const std::string& address) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  if (::inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) sa.sin_addr.s_addr = htonl(INADDR_ANY);
  int port = 0;
  socklen_t len = sizeof(sa);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0)
    port = ntohs(sa.sin_port);
  ::close(fd);
  return port;
}

}  // namespace

Result<MasterAddress> MasterAddress::Open(const RendezvousAddress& rdzv, int64_t generation) {
  MasterAddress m;
  if (rdzv.kind == RendezvousAddress::Kind::kFile) {
    ELASTRAIN_ASSIGN_OR_RETURN(m.store_, MakeFileStore(rdzv.dir));
  } else {
    StoreOptions so;
    so.key_scope = keys::kRoot;
    FillStoreCredentialsFromEnv(&so);
    ELASTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<Store> s, OpenStore(rdzv.store_url, so));
    m.store_ = MakeGlooStore(s, rdzv.prefix, so);
  }
  m.key_ = fmt::format("launch_master_g{}", generation);
  return m;
}

Result<std::pair<std::string, int>> MasterAddress::Pick(const std::string& address) {
  const int port = FreePort(address);
  if (port == 0) return Status::Unavailable("no free port for MASTER_PORT on " + address);
  value_ = fmt::format("{}:{}", address, port);
  return std::make_pair(address, port);
}

Status MasterAddress::Publish() {
  try {
    store_->set(key_, std::vector<char>(value_.begin(), value_.end()));
  } catch (const std::exception& e) {
    return Status::Unavailable(fmt::format("rendezvous store: cannot publish {}: {}", key_, e.what()));
  }
  return Status::OK();
}

Result<std::pair<std::string, int>> MasterAddress::Await(double timeout_seconds,
                                                         const std::function<bool()>& keep_going) {
  const double deadline = WallSeconds() + timeout_seconds;
  try {
    for (;;) {
      try {
        store_->wait({key_}, std::chrono::milliseconds(100));
        break;
      } catch (const std::exception&) {
        if (!keep_going()) return Status::Cancelled("gave up waiting for rank 0's address");
        if (WallSeconds() > deadline)
          return Status::DeadlineExceeded(fmt::format(
              "rank 0 did not publish MASTER_ADDR/MASTER_PORT within collective_timeout={}s", timeout_seconds));
      }
    }
    const std::vector<char> got = store_->get(key_);
    const std::string v(got.begin(), got.end());
    const size_t colon = v.rfind(':');
    int port = 0;
    if (colon != std::string::npos && v.size() - colon <= 6) port = std::atoi(v.c_str() + colon + 1);
    if (colon == std::string::npos || colon == 0 || port <= 0 || port > 65535 || v.size() > 300)
      return Status::InvalidArgument(fmt::format("rendezvous key {}: expected address:port, got '{}'", key_,
                                                 v.substr(0, 80)));
    return std::make_pair(v.substr(0, colon), port);
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("rendezvous store: ") + e.what());
  }
}

bool PortListening(int port) {
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      // "  0: 0100007F:1F90 00000000:0000 0A ..." (local address:port, remote, state; 0A: LISTEN)
      char local[64] = {}, remote[64] = {};
      unsigned state = 0;
      if (std::sscanf(line.c_str(), " %*d: %63s %63s %x", local, remote, &state) != 3 || state != 0x0A) continue;
      const char* colon = std::strrchr(local, ':');
      if (colon && static_cast<int>(std::strtol(colon + 1, nullptr, 16)) == port) return true;
    }
  }
  return false;
}

}  // namespace elastrain
