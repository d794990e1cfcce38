// The node agent: one per host. It registers in the store with a lease (its liveness),
// keeps one worker process per slot while a job runs (a pool: the controller assigns
// ranks to idle workers, and a dead worker's slot gets a fresh process in the
// background, off the recovery's critical path), delivers each generation's plan to
// its workers, and reports their state and exits. Its decisions are a pure state
// machine (elastic/agent_machine.h, which documents them); Run() is the executor.
//
// Failure detection, all local and immediate:
//   a worker's death closes its channel (wire/channel.h): seen within one poll;
//   a worker that sends nothing for worker_heartbeat_timeout (stopped, frozen) is
//   SIGKILLed and reported as hung;
//   a worker still running an old generation after the grace is killed as a straggler.
// Exit kinds in reports (wire/worker_vocab.h): failure (counted by the controller),
// preempted (exit code 3: not counted), hung, ended (killed by the agent: shutdown or
// straggler), success.
//
// A preemption notice for the whole host (SIGTERM or SIGINT to `elastrain agent`, or
// Preempt()) forwards SIGTERM to every worker, waits up to preemption_notice_seconds for
// them to save and leave, records them under elastrain/departed/<id> and deregisters.
//
// Waiting costs nothing: Run() blocks in one poll() on the workers' channels and a
// wake-up fd, which a second thread notifies whenever the store's revision moves (it
// blocks in Store::WaitForChange: a condition variable in memory, a watch on etcd);
// otherwise it wakes for the machine's Tick at most every kAgentIdleWait.
//
// Self-fencing: a third thread keeps the lease alive (elastic/lease_keeper.h). When it
// cannot renew for 3/4 of the lease time it SIGKILLs every worker (a cut-off host's
// workers never outlive its registration); when the lease is gone the agent registers
// again with a new one, its slots fresh capacity.
//
// Health checks (elastic/health_check.h; `elastrain agent` runs them, the agent embedded in
// `elastrain train` does not): one before it registers, one whenever the controller sends
// check_health, and one every health_check_period seconds while none of its workers is in
// a generation; while they are, the last verdict is renewed instead (training is the
// check then, and the probe would take the workers' CPU). Checks run on a thread of their
// own; each writes elastrain/health/<host>. A failing host still registers, so that the
// controller can say why it is not planned.
//
// Threading: Run() owns all state and must stay on the thread that spawns the workers
// (PR_SET_PDEATHSIG is tied to that thread). Preempt() and RequestStop() may be called
// from any thread or a signal handler.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "common/wakeup.h"
#include "elastic/agent_machine.h"  // AgentEnd
#include "elastic/health_check.h"
#include "store/signed_records.h"
#include "store/store.h"

namespace elastrain {

// How long an agent's registration outlives its last keep-alive.
inline constexpr std::chrono::milliseconds kDefaultAgentLeaseTtl{3000};
// Longest the agent's loop sleeps when nothing happens: the machine's time-based rules
// (heartbeat timeouts, grace periods, back-off, progress reports) are
// checked at least this often. Events (a worker's message or death, a store change, a
// stop) wake it at once.
inline constexpr std::chrono::milliseconds kAgentIdleWait{100};

struct AgentOptions {
  std::string id;                    // unique among live agents; empty: "<host>-<pid>"
  std::string host;                  // empty: this machine's host name
  std::string address = "127.0.0.1"; // where its workers bind for Gloo
  int slots = 1;                     // worker processes
  std::chrono::milliseconds lease_ttl = kDefaultAgentLeaseTtl;
  bool exit_when_job_ends = false;   // embedded mode: Run returns once the job is over
  // Added to every worker's environment (a launch's own entries win): the store's
  // credentials, ELASTRAIN_ETCD_*, so that workers reach an etcds:// rendezvous.
  std::map<std::string, std::string> worker_env;
  // The store handle lease renewals use; null: the main one. Give it a request timeout of
  // about lease_ttl / 4 (LeaseKeeper's timing); the main one keeps its longer timeout.
  std::shared_ptr<Store> lease_store;
  // Health checks (elastic/health_check.h): off unless `health_checks`.
  bool health_checks = false;
  std::string health_check_command;  // --health-check: run by /bin/sh -c; empty: the built-in steps only
  std::chrono::milliseconds health_check_timeout = kDefaultHealthCheckTimeout;
  double health_check_period = kDefaultHealthCheckPeriodSeconds;  // 0: at registration and on command only
  // The head's public key (--head-public-key; store/signed_records.h): when set, the job
  // spec, plan, stop and commands are acted on only when the head signed them. Null: any
  // record is taken as written (embedded mode's in-process store; an agent started with
  // --insecure-unsigned-jobs).
  std::shared_ptr<const VerifyKey> head_key;
  // What this agent runs and where jobs may read and write (elastic/admission.h): set
  // by `elastrain agent`; none (embedded `train`: the user's own job) admits anything.
  std::optional<Admission> admission;
};

class Agent {
 public:
  Agent(std::shared_ptr<Store> store, AgentOptions opt);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Until RequestStop(), a preemption has been carried out, or (exit_when_job_ends)
  // the job is over. Kills its workers before returning.
  Result<AgentEnd> Run();
  void RequestStop() {
    stop_ = true;
    wake_.Notify();
  }
  void Preempt() {
    preempt_ = true;
    wake_.Notify();
  }
  const AgentOptions& options() const { return opt_; }

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<Store> store_;
  AgentOptions opt_;
  std::atomic<bool> stop_{false}, preempt_{false};
  Wakeup wake_;  // Run's poll wakes on it: a stop, a preemption, a change in the store
};

}  // namespace elastrain
