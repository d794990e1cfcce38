// The messages of the agent <-> worker channel (wire/channel.h): one struct per message
// "type", translated to and from JSON only here, so the agent (elastic/agent_machine.h)
// and the worker (train/worker.cpp) handle typed values. The JSON objects on the channel
// are the same as before the structs existed: the same keys and the same strings.
//
// Agent -> worker, in the order a worker sees them:
//   job     (first, once) the config and settings of the job
//   assign  a generation's plan for it: rank, mesh, restore, rendezvous, peers
//   stop    stop a generation at a step boundary, for a resize or the user
//   abort   end a generation at once (it lost a member, or a newer one was planned)
//   exit    leave (the job is over, or the agent stops)
// Worker -> agent:
//   ready       set up and idle (once, after job)
//   started     began a generation as a rank
//   step        finished a step
//   checkpoint  committed a checkpoint as chief
//   progress    a tick every 250 ms, whatever it does: its heartbeat
//   ended       a generation ended, and how (leaving: it exits next, on a notice)
//   fatal       it cannot run the job (its config does not load); it exits next
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "wire/protocol.h"
#include "wire/stop_reason.h"
#include "wire/worker_vocab.h"

namespace elastrain {

// ------------------------------------------------------------ agent -> worker
struct JobMessage {
  std::string config_yaml;   // the resolved config (JobSpec::config_yaml)
  std::string worker_id;     // WorkerRecord::id
  std::string host;
  int threads = 0;           // compute threads (0: the worker's default)
  double peak_flops = 0;     // this host's SGEMM ceiling as an earlier worker measured it, FLOP/s (0: none yet)
  std::string head_public_key;  // the head's Ed25519 key (PEM) the agent verifies with; "" when unsigned
  // What the agent admits (elastic/admission.h): when `confined`, the worker refuses a
  // program or data path outside these (resolved) lists before it runs anything.
  bool confined = false;
  std::vector<std::string> allowed_programs, allowed_paths;
  std::string agent;  // the agent's id (for the refusals' messages)
};

struct AssignPeer {
  int rank = 0;
  std::string host;
  int pid = 0;
};

struct AssignMessage {
  int64_t generation = -1;
  int rank = -1;
  int world = 0;
  int data = 1, fsdp = 1, tensor = 1;
  RestorePlan restore;
  RendezvousAddress rendezvous;
  bool inject_failure = false;
  int64_t failures = 0;
  double job_started_at = 0;
  std::string address;       // where this worker binds (its agent's address)
  std::vector<AssignPeer> members;
  int64_t covered_failures = 0;  // Plan::covered_failures
};

struct StopMessage {
  int64_t generation = -1;
  StopReason reason = kStopResize;  // kStopResize ("resize") or kStopUser ("user")
};

struct AbortMessage {
  int64_t generation = -1;
};

struct ExitMessage {};

using AgentMessage = std::variant<JobMessage, AssignMessage, StopMessage, AbortMessage, ExitMessage>;

// ------------------------------------------------------------ worker -> agent
struct ReadyMessage {
  int pid = 0;
  int64_t state_step = -1;   // the step of the replica it holds in memory (-1: none)
  double peak_flops = 0;     // the SGEMM ceiling it measured, FLOP/s (0: none measured)
};

struct StartedMessage {
  int64_t generation = -1;
  int rank = -1;
  int world = 0;
};

struct StepMessage {
  int64_t generation = -1;
  int64_t step = -1;
  int64_t start_step = -1;
  double loss = 0;
  double step_seconds = 0;
  double time = 0;           // when it completed (wall seconds)
  // The step's anatomy (issue 32): compute_seconds + wait_seconds <= step_seconds.
  double compute_seconds = 0;  // forward, backward, update, its own I/O
  double wait_seconds = 0;     // blocked in collectives
};

struct CheckpointMessage {
  int64_t step = -1;
  double time = 0;
};

struct ProgressMessage {
  int64_t generation = -1;
  int64_t step = -1;
  TrainPhase phase = TrainPhase::kIdle;
  double time = 0;
  // The collective it entered last in `generation` (WorkerRecord::collective_seq etc.).
  int64_t collective_seq = -1;
  std::string collective_kind;
  bool in_collective = false;
};

struct EndedMessage {
  int64_t generation = -1;
  GenerationOutcome outcome = GenerationOutcome::kNone;
  int stop_reasons = 0;
  int64_t start_step = -1;
  int64_t step = -1;
  int64_t state_step = -1;
  bool leaving = false;      // it exits next (a preemption notice, an injected failure)
  std::string error;
  int64_t copies_generation = -1;  // WorkerRecord::copies_generation
  std::vector<HeldCopy> copies;
  bool timed_out = false;    // it failed because a blocking call (a collective) ran past its timeout
};

struct FatalMessage {
  std::string error;
};

using WorkerMessage = std::variant<ReadyMessage, StartedMessage, StepMessage, CheckpointMessage, ProgressMessage,
                                   EndedMessage, FatalMessage>;

// JSON objects <-> messages. A parse error names the message type and what is wrong
// (an unknown type, a field of the wrong kind, an unknown enum name).
nlohmann::json ToJson(const AgentMessage& m);
nlohmann::json ToJson(const WorkerMessage& m);
Status FromJson(const nlohmann::json& j, AgentMessage* m);
Status FromJson(const nlohmann::json& j, WorkerMessage* m);

}  // namespace elastrain
