// The line protocol between an agent and each of its worker processes: one JSON object
// per line over a Unix socket pair that the agent creates and the worker inherits as a
// file descriptor (fd 3, `elastrain worker --channel-fd 3`). A worker's death closes its
// end at once, so the agent learns of it within one poll, without waitpid polling or
// timeouts; and an agent's death ends its workers the same way.
//
// The messages, one struct each, and their fields are in wire/worker_messages.h:
// Agent -> worker: job (config and settings, first), assign (a generation's plan for it),
//                  stop (at a step boundary, with a reason), abort, exit.
// Worker -> agent: ready, started, step, progress (ticks: its heartbeat), checkpoint,
//                  ended, fatal.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace elastrain {

// The longest line a Channel takes (a job message carries the resolved config); a peer
// that sends a longer one is treated as gone.
inline constexpr size_t kMaxChannelLine = 4 << 20;

class Channel {
 public:
  explicit Channel(int fd);  // takes ownership of fd
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  int fd() const { return fd_; }
  // Writes one line. Thread-safe. Unavailable once the peer is gone. Blocks while the
  // peer reads nothing and the socket buffer (~200 KB: minutes of a worker's messages) is
  // full; the agent's loop never stops reading for long.
  Status Send(const nlohmann::json& msg);
  // Appends every complete message readable now to *out without blocking; Unavailable
  // at end of file (the peer closed or died), Corruption after a line over
  // kMaxChannelLine, after appending what came before it.
  // Reader side: one thread at a time.
  Status ReadAvailable(std::vector<nlohmann::json>* out);
  // Waits up to `timeout` for one message (nullopt if none came); Unavailable at EOF.
  Result<std::optional<nlohmann::json>> Receive(std::chrono::milliseconds timeout);

 private:
  // Moves complete lines of buf_ into *out.
  void TakeLines(std::vector<nlohmann::json>* out);
  const int fd_;
  std::mutex send_mu_;
  std::string buf_;                        // bytes after the last complete line
  std::vector<nlohmann::json> pending_;    // parsed but not yet returned by Receive
};

// A connected pair of stream sockets, both close-on-exec: {agent's end, worker's end}.
Result<std::pair<int, int>> MakeChannelPair();

}  // namespace elastrain
