// The line protocol between a launched program (`elastrain launch`) and the elastrain
// worker that supervises it: one JSON object per line over a Unix socket the program
// inherits as ELASTRAIN_CHANNEL_FD. Optional for the program: one that never writes
// runs exactly as under torchrun. python/elastrain_worker.py and
// include/elastrain_worker.h speak it; docs/launch.md documents it.
//
// Program -> worker:
//   hello       {"type":"hello","pid":N,"warm":B}     first; warm: it was started as a spare
//   waiting     {"type":"waiting"}                     (a spare) in wait_for_assignment()
//   heartbeat   {"type":"heartbeat"}                   alive; sent by the module's thread
//   step        {"type":"step","step":N,"loss":X,"tokens":N,"step_seconds":X,"compute_seconds":X,
//                "metrics":{...}}  compute_seconds: the part of the step outside collectives
//                (<= step_seconds when both are given)
//   checkpoint  {"type":"checkpoint","step":N,"seconds":X}  a checkpoint of step N is committed
//   collective  {"type":"collective","seq":N,"kind":K,"inside":B}  it entered (inside: true) or
//                left collective N (counted from 0 in this process) of kind K (allreduce,
//                allgather, reduce_scatter, broadcast, barrier, exchange, connect): a hang's
//                diagnosis names the rank behind by these (issue 32)
// Worker -> program:
//   assign      {"type":"assign","env":{"RANK":"0",...}}   (a spare) the rank to take
//   control     {"type":"control","stop":B,"reason":"resize|user|preemption","deadline":T,
//                "checkpoint_period":N}  a stop is pending (save, then exit 0 by the wall
//                time T), and the checkpoint period elastrain suggests (0: none)
//
// Everything a program sends is checked (types, ranges, sizes) like any other input:
// a message that fails is dropped with a warning naming the field, never trusted.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace elastrain {

struct ProgramHello { int pid = 0; bool warm = false; };
struct ProgramWaiting {};
struct ProgramHeartbeat {};
struct ProgramStep {
  int64_t step = -1;          // >= 0
  double loss = 0;            // NaN when not given
  int64_t tokens = 0;         // tokens of this step over all ranks (0: not given)
  double step_seconds = 0;    // 0: not given (the worker measures between reports)
  std::map<std::string, double> metrics;  // at most 32 finite numbers, names of [A-Za-z0-9_.] <= 64
  // The step's compute (forward, backward, update, its own I/O): the rest of step_seconds
  // was spent waiting in collectives. Finite, >= 0, and <= step_seconds (up to rounding)
  // when that is given. Not given: the whole step counts as compute.
  std::optional<double> compute_seconds;
};
struct ProgramCheckpoint { int64_t step = -1; double seconds = 0; };
struct ProgramCollective {
  int64_t seq = -1;           // >= 0
  std::string kind;           // a word of kCollectiveKindChoices (common/collective_kind.h), not ""
  bool inside = false;
};

using ProgramMessage =
    std::variant<ProgramHello, ProgramWaiting, ProgramHeartbeat, ProgramStep, ProgramCheckpoint, ProgramCollective>;

// InvalidArgument naming the message type and the field when `j` is not a valid message.
Status ParseProgramMessage(const nlohmann::json& j, ProgramMessage* out);

struct ProgramControl {
  bool stop = false;
  std::string reason;         // resize | user | preemption ("" when no stop)
  double deadline = 0;        // wall seconds (0: none)
  int64_t checkpoint_period = 0;
};
nlohmann::json AssignToProgram(const std::map<std::string, std::string>& env);
nlohmann::json ControlToProgram(const ProgramControl& c);

}  // namespace elastrain
