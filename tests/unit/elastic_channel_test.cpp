// The agent <-> worker channel: line framing, partial lines, and a dead peer seen as
// end of file at once (what the agent's failure detection rests on).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "wire/channel.h"

namespace elastrain {
namespace {

TEST(ElasticChannel, MessagesCrossInOrderAndWhole) {
  auto pair = MakeChannelPair();
  ASSERT_TRUE(pair.ok());
  Channel a(pair->first), b(pair->second);
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(a.Send({{"type", "step"}, {"step", i}, {"pad", std::string(i * 50, 'x')}}).ok());
  for (int i = 0; i < 40; ++i) {  // 40 KB in all: within the socket buffer
    auto m = b.Receive(std::chrono::milliseconds(1000));
    ASSERT_TRUE(m.ok());
    ASSERT_TRUE(m.value().has_value()) << "message " << i;
    EXPECT_EQ((*m.value())["step"], i);
    EXPECT_EQ((*m.value())["pad"].get<std::string>().size(), static_cast<size_t>(i * 50));
  }
  auto none = b.Receive(std::chrono::milliseconds(20));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value().has_value());
}

TEST(ElasticChannel, APartialLineWaitsForItsEnd) {
  auto pair = MakeChannelPair();
  ASSERT_TRUE(pair.ok());
  Channel b(pair->second);
  const std::string half = "{\"type\":\"rea";
  ASSERT_EQ(::send(pair->first, half.data(), half.size(), 0), static_cast<ssize_t>(half.size()));
  std::vector<nlohmann::json> got;
  ASSERT_TRUE(b.ReadAvailable(&got).ok());
  EXPECT_TRUE(got.empty());
  const std::string rest = "dy\"}\nnot json\n{\"type\":\"x\"}\n";
  ASSERT_EQ(::send(pair->first, rest.data(), rest.size(), 0), static_cast<ssize_t>(rest.size()));
  ASSERT_TRUE(b.ReadAvailable(&got).ok());
  ASSERT_EQ(got.size(), 2u);  // the malformed line is dropped, the others kept
  EXPECT_EQ(got[0]["type"], "ready");
  EXPECT_EQ(got[1]["type"], "x");
  ::close(pair->first);
}

TEST(ElasticChannel, ADeadPeerIsEndOfFileAndSendFails) {
  auto pair = MakeChannelPair();
  ASSERT_TRUE(pair.ok());
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pair->first);
    Channel c(pair->second);
    (void)c.Send({{"type", "last words"}});
    ::raise(SIGKILL);  // die without closing anything itself
  }
  ::close(pair->second);
  Channel a(pair->first);
  auto first = a.Receive(std::chrono::milliseconds(5000));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first.value().has_value());
  EXPECT_EQ((*first.value())["type"], "last words");
  const auto t0 = std::chrono::steady_clock::now();
  auto eof = a.Receive(std::chrono::milliseconds(5000));
  EXPECT_FALSE(eof.ok());
  EXPECT_EQ(eof.status().code(), StatusCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2000));
  EXPECT_FALSE(a.Send({{"type", "anyone?"}}).ok());  // EPIPE, not SIGPIPE
  int status = 0;
  ::waitpid(child, &status, 0);
}

}  // namespace
}  // namespace elastrain

namespace elastrain {

// A peer that writes without ever ending a line (a broken or hostile launched program)
// does not grow the reader without bound: past kMaxChannelLine it counts as gone, and
// the lines before it are still delivered.
TEST(ElasticChannel, ALineOverTheLimitEndsTheChannel) {
  auto pair = MakeChannelPair();
  ASSERT_TRUE(pair.ok());
  Channel reader(pair->first);
  const int writer = pair->second;
  std::thread w([writer] {
    const std::string first = "{\"type\":\"heartbeat\"}\n";
    (void)!::write(writer, first.data(), first.size());
    const std::string chunk(64 * 1024, 'x');
    for (size_t sent = 0; sent < kMaxChannelLine + 2 * chunk.size(); sent += chunk.size())
      if (::send(writer, chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0) break;  // the reader gave up
    ::close(writer);
  });
  std::vector<nlohmann::json> got;
  Status st = Status::OK();
  for (int i = 0; i < 2000 && st.ok(); ++i) {
    st = reader.ReadAvailable(&got);
    if (st.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  w.join();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.message();
  EXPECT_NE(st.message().find("longer than"), std::string::npos) << st.message();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["type"], "heartbeat");
}

}  // namespace elastrain
