// The worker process: `elastrain worker --channel-fd N`, started by an agent, one per
// slot. It lives across generations: it waits for an assignment, trains that generation
// (train/trainer.h), reports how it ended, keeps a full replica of the state in memory
// when the mesh is purely data parallel, and waits for the next assignment. Only a
// process that died is replaced by a fresh one, so a recovery costs a rendezvous and
// (for newcomers) one broadcast of the state, not a restart of every process.
//
// Lifecycle (the `phase` its agent reports, wire/worker_vocab.h): starting -> idle <->
// running -> exited, through leaving when a preemption notice ends a generation.
// Signals: SIGTERM is a preemption notice: a running generation stops after the current
// step on every rank, saves a checkpoint, and this process exits with kExitPreempted;
// an idle one exits at once. SIGINT is ignored (the agent decides).
// Exit codes (wire/exit_codes.h): 0 when told to exit, 1 after an injected or fatal
// failure, 2 when the job's config cannot load, 3 after a preemption notice.
#pragma once

#include <functional>
#include <memory>

#include "common/status.h"
#include "store/signed_records.h"
#include "store/store.h"
#include "wire/channel.h"
#include "wire/rendezvous.h"
#include "wire/worker_messages.h"

namespace elastrain {

// The agent's first message on a fresh worker's channel (within a minute).
Result<JobMessage> ReceiveJobMessage(Channel* ch);
// Trains the job's generations until told to exit; the process's exit code.
int RunWorkerProcess(Channel* ch, const JobMessage& job);
// GenerationControl::still_current in cluster mode: reads the job's plan from `store`
// now. OK when it is generation `gen` of the job whose rendezvous is `rendezvous`;
// FailedPrecondition when it is another generation or job, missing or unreadable (the
// record is not trusted); Unavailable when the store cannot be reached. With `head_key`
// (the agent verifies signed jobs), a plan the head did not sign, or one signed earlier
// than a plan this check already accepted (a replay), is FailedPrecondition too: a
// forged plan cannot keep a stale generation writing.
std::function<Status()> StillCurrent(std::shared_ptr<Store> store, RendezvousAddress rendezvous, int64_t gen,
                                     std::shared_ptr<const VerifyKey> head_key = nullptr);

}  // namespace elastrain
