// The worker of an `elastrain launch` job: the process an agent supervises in place of
// the built-in trainer. It speaks the agent's channel (wire/worker_messages.h) exactly
// as `elastrain worker` does, so the agent, the controller, the dashboard and the
// goodput accounting treat a launched job like a trained one, and runs the user's
// program once per generation with torchrun's environment (launch/rank_env.h):
//
//   ready (at once) --assign g--> a program runs as rank r of g  --it exits 0--> completed
//                                   |  stop (resize, user): control message to the
//                                   |    program, SIGTERM when it does not talk or by
//                                   |    the deadline, SIGKILL preemption_notice_seconds later --> stopped
//                                   |  abort (a member was lost): SIGKILL --> aborted
//                                   |  it dies otherwise --> failed (its exit code or signal)
//                                   v
//                                 idle: the next assign starts the next program
//
// The program's optional channel (wire/program_messages.h) carries its step reports
// (forwarded as the worker's steps: the controller's stall rule, goodput, metrics.jsonl
// from rank 0), checkpoint commits and heartbeats: once a program has said hello, the
// worker's liveness ticks follow the program's (a stopped program stops them and the
// agent kills the worker as hung after worker_heartbeat_timeout).
//
// warm_spares: a spare program is started ahead of need and waits in the module's
// wait_for_assignment(); a generation hands the rank to it (an `assign` line) instead
// of starting a cold process, and the next spare starts once that generation trains.
//
// Processes: programs run in this worker's process group (so an agent's SIGKILL to the
// group ends the whole tree) and die with it (PR_SET_PDEATHSIG). The worker is a child
// subreaper: whatever a finished program left behind becomes its child and is killed.
// SIGTERM is a preemption notice: forwarded to the group, the program has
// preemption_notice_seconds to save and exit, then SIGKILL; the worker exits 3.
//
// The decisions are launch/launch_machine.h's (a pure state machine, its transitions
// drawn there); launched_worker.cpp is its executor.
#pragma once

#include "config/config.h"
#include "wire/channel.h"
#include "wire/worker_messages.h"

namespace elastrain {

// Runs until told to exit, the agent is gone or a preemption is carried out; returns the
// process's exit code (wire/exit_codes.h).
int RunLaunchedWorker(Channel* agent, const JobMessage& job, const TrainConfig& cfg);

}  // namespace elastrain
