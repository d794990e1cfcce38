// The agent <-> worker channel (src/wire/channel.h) and its messages
// (src/wire/worker_messages.h). The input is what arrives on a worker's socket: lines of
// JSON. It goes through a real socket pair into Channel::ReadAvailable, and every object
// it yields is decoded both as an agent message and as a worker message. Property of a
// decoded message: ToJson's object decodes back to an equal object.
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "fuzz_check.h"
#include "wire/channel.h"
#include "wire/worker_messages.h"

using namespace elastrain;

namespace {
// Missing fields keep their defaults, and an assign without "rendezvous" gets the
// default address, an empty directory, which ToJson writes as "file:" and
// RendezvousAddress::Parse refuses; such a message cannot round-trip.
bool Encodable(const AgentMessage& m) {
  const auto* a = std::get_if<AssignMessage>(&m);
  return !(a && a->rendezvous.kind == RendezvousAddress::Kind::kFile && a->rendezvous.dir.empty());
}
bool Encodable(const WorkerMessage&) { return true; }

template <typename Message>
void Decode(const nlohmann::json& j) {
  Message m;
  if (!FromJson(j, &m).ok() || !Encodable(m)) return;
  const nlohmann::json encoded = ToJson(m);
  Message again;
  FUZZ_CHECK(FromJson(encoded, &again).ok(), "ToJson's object of a decoded message decodes");
  FUZZ_CHECK(ToJson(again) == encoded, "a message survives ToJson and FromJson unchanged");
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // Channel logs each malformed line
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Result<std::pair<int, int>> fds = MakeChannelPair();
  FUZZ_CHECK(fds.ok(), "socketpair");
  Channel reader(fds->first);
  // max_len keeps the input below the socket buffer, so one write never blocks.
  FUZZ_CHECK(size == 0 || ::send(fds->second, data, size, MSG_NOSIGNAL) == static_cast<ssize_t>(size), "send");
  ::close(fds->second);
  std::vector<nlohmann::json> messages;
  Status st = reader.ReadAvailable(&messages);
  FUZZ_CHECK(!st.ok(), "end of file after the input is reported");
  for (const nlohmann::json& j : messages) {
    FUZZ_CHECK(j.is_object(), "the channel yields only objects");
    Decode<AgentMessage>(j);
    Decode<WorkerMessage>(j);
  }
  return 0;
}
