// The connection guard (comm/gloo_guard.h) without Gloo: two guards of a group of 2 make a
// pair's connection through the interposed connect(2), as connectFullMesh would, while a
// stranger connects to the acceptor's listener first.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "comm/gloo_guard.h"

namespace elastrain {
namespace {

using Clock = ConnectionGuard::Clock;

std::unique_ptr<ConnectionGuard> OpenGuard(int rank, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto g = ConnectionGuard::Open("127.0.0.1", "test/guard", rank, 2, Clock::now() + timeout, nullptr);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(g.value());
}

// The listener address in a guard record (magic, length, sockaddr_storage, secret).
sockaddr_in ListenerOf(const std::vector<char>& record) {
  sockaddr_in a{};
  std::memcpy(&a, record.data() + 8, sizeof(a));
  return a;
}

// What Gloo does for a pair once its peer's address is the zero address: a fresh socket,
// connect to 0.0.0.0:0 on the thread that holds the guard.
int GlooStyleConnect(ConnectionGuard* g, int* fd_out) {
  ConnectionGuard::Active active(g);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in zero{};
  zero.sin_family = AF_INET;
  *fd_out = fd;
  return ::connect(fd, reinterpret_cast<sockaddr*>(&zero), sizeof(zero));
}

// A stranger who connects and sends a sequence number and random bytes.
int Stranger(const sockaddr_in& to) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)), 0);
  unsigned char junk[72] = {1, 0, 0, 0, 0, 0, 0, 0};
  for (size_t i = 8; i < sizeof(junk); ++i) junk[i] = static_cast<unsigned char>(i * 37);
  EXPECT_EQ(::send(fd, junk, sizeof(junk), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(junk)));
  return fd;
}

TEST(ConnectionGuard, PairConnectsDespiteAStrangerWhoCameFirst) {
  auto g0 = OpenGuard(0), g1 = OpenGuard(1);
  ASSERT_TRUE(g0->AddPeer(1, g1->Record()).ok());
  ASSERT_TRUE(g1->AddPeer(0, g0->Record()).ok());
  const int stranger = Stranger(ListenerOf(g1->Record()));  // before rank 0 dials
  int fd1 = -1, rv1 = -1;
  std::thread acceptor([&] { rv1 = GlooStyleConnect(g1.get(), &fd1); });
  int fd0 = -1;
  const int rv0 = GlooStyleConnect(g0.get(), &fd0);
  acceptor.join();
  ASSERT_EQ(rv0, 0) << g0->error();
  ASSERT_EQ(rv1, 0) << g1->error();
  EXPECT_EQ(g1->refused(), 1);
  // The two Gloo sockets are the two ends of one connection, with nothing left in between.
  ASSERT_EQ(::send(fd0, "ping", 4, MSG_NOSIGNAL), 4);
  char buf[8] = {};
  for (int i = 0; i < 100 && ::recv(fd1, buf, sizeof(buf), 0) <= 0; ++i) ::usleep(10000);
  EXPECT_EQ(std::string(buf), "ping");
  ::close(stranger);
  ::close(fd0);
  ::close(fd1);
}

TEST(ConnectionGuard, AWrongSecretIsRefusedOnBothSides) {
  auto g0 = OpenGuard(0, std::chrono::seconds(2)), g1 = OpenGuard(1, std::chrono::seconds(2));
  std::vector<char> forged = g1->Record();
  forged.back() ^= 1;  // rank 0 reads a secret of rank 1 that is not rank 1's
  ASSERT_TRUE(g0->AddPeer(1, forged).ok());
  ASSERT_TRUE(g1->AddPeer(0, g0->Record()).ok());
  int fd1 = -1, rv1 = 0;
  std::thread acceptor([&] { rv1 = GlooStyleConnect(g1.get(), &fd1); });
  int fd0 = -1;
  const int rv0 = GlooStyleConnect(g0.get(), &fd0);
  acceptor.join();
  EXPECT_EQ(rv0, -1);
  EXPECT_EQ(rv1, -1);
  EXPECT_NE(g0->error().find("closed the connection"), std::string::npos) << g0->error();
  EXPECT_NE(g1->error().find("did not connect and prove itself"), std::string::npos) << g1->error();
  EXPECT_EQ(g1->refused(), 1);
  ::close(fd0);
  ::close(fd1);
}

TEST(ConnectionGuard, ARecordThatIsNotOneIsRefused) {
  auto g0 = OpenGuard(0);
  Status st = g0->AddPeer(1, std::vector<char>(12, 'x'));
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("elastrain_guard_1"), std::string::npos) << st.message();
}

TEST(ConnectionGuard, OtherConnectsPassThrough) {
  auto g0 = OpenGuard(0);
  ConnectionGuard::Active active(g0.get());
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to = ListenerOf(g0->Record());  // a real address: not the guard's business
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
  EXPECT_EQ(g0->pairs_connected(), 0);
  ::close(fd);
}

}  // namespace
}  // namespace elastrain
