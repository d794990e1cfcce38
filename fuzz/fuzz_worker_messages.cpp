// The agent <-> worker channel (src/wire/channel.h) and its messages
// (src/wire/worker_messages.h). The input is what arrives on a worker's socket: lines of
// JSON. It goes through a real socket pair into Channel::ReadAvailable, and every object
// it yields is decoded both as an agent message and as a worker message. Property of a
// decoded message: ToJson's object decodes back to an equal object. Every decoded worker
// message is then fed to an agent's state machine (elastic/agent_machine.h) as its
// running worker's (generation and step rewritten so that step reports and progress
// ticks are taken): whatever the figures, the worker's record keeps only what can be a
// measurement (step anatomy: at most kAnatomyWindow steps, means finite and in range;
// collective mark: a known kind, seq >= -1, inside only after one was entered).
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <utility>
#include <vector>

#include "common/collective_kind.h"
#include "elastic/agent_machine.h"
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

// Agent "a" with one worker "a-w0", ready and rank 0 of generation 0.
AgentMachine RunningAgent() {
  AgentMachineOptions o;
  o.id = "a";
  o.host = "h";
  o.store_url = "memory://";
  AgentMachine m(o);
  JobObserved job;
  job.spec = JobSpec{"j", "", "/runs/j", 1};
  job.settings = AgentJobSettings{};
  m.Step(job, 1);
  m.Step(WorkerSpawned{"a-w0", 100}, 1);
  m.Step(WorkerSaid{"a-w0", ReadyMessage{100, -1, 0}}, 1);
  Plan p;
  p.job_id = "j";
  p.generation = 0;
  p.world = p.data = 1;
  p.rendezvous = RendezvousAddress::File("/runs/j/rendezvous/j");
  p.members.push_back({0, "a-w0", "a", "h", 100});
  m.Step(PlanSeen{p}, 1);
  const WorkerRecord* r = m.Worker("a-w0");
  FUZZ_CHECK(r && r->generation == 0 && r->phase == WorkerPhase::kRunning, "the worker runs generation 0");
  return m;
}

void CheckRecord(const WorkerRecord& r) {
  FUZZ_CHECK(r.timed_steps >= 0 && r.timed_steps <= kAnatomyWindow, "timed_steps in [0, kAnatomyWindow]");
  for (double v : {r.compute_seconds, r.wait_seconds})
    FUZZ_CHECK(std::isfinite(v) && v >= 0 && v <= kMaxTimedStepSeconds, "anatomy means finite and in range");
  FUZZ_CHECK((r.timed_steps == 0) == (r.timed_until_step == -1), "timed_until_step set exactly when timed");
  FUZZ_CHECK(r.collective_seq >= -1, "collective_seq >= -1");
  FUZZ_CHECK(ParseChoice(kCollectiveKindChoices, r.collective_kind).has_value(), "a known collective kind");
  FUZZ_CHECK(!r.in_collective || r.collective_seq >= 0, "inside only a collective entered");
}

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
  AgentMachine agent = RunningAgent();
  double now = 2;
  for (const nlohmann::json& j : messages) {
    FUZZ_CHECK(j.is_object(), "the channel yields only objects");
    Decode<AgentMessage>(j);
    Decode<WorkerMessage>(j);
    WorkerMessage m;
    if (!FromJson(j, &m).ok()) continue;
    // Of generation 0, and a step after any before, so that the figures are what decides.
    if (auto* step = std::get_if<StepMessage>(&m)) {
      step->generation = 0;
      step->step = static_cast<int64_t>(now);
    }
    if (auto* tick = std::get_if<ProgressMessage>(&m)) tick->generation = 0;
    if (std::holds_alternative<EndedMessage>(m) || std::holds_alternative<StartedMessage>(m)) continue;
    agent.Step(WorkerSaid{"a-w0", m}, now);
    now += 1;
    const WorkerRecord* r = agent.Worker("a-w0");
    FUZZ_CHECK(r != nullptr, "the worker is still known");
    CheckRecord(*r);
  }
  return 0;
}
