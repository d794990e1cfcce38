// The controller: owns one job at a time in a store. A small executor around the pure
// policy (elastic/policy.h): observe the store, Decide, write what was decided (the
// plan with compare-and-swap, stop requests, agent commands, the job record), log
// events to <run>/events.jsonl, wait for the next change. All of its state is the job
// record in the store, so a controller that is killed and started again (`elastrain
// head` restarted) resumes the job: workers keep training meanwhile, since they need
// the controller only to change generations.
//
// One controller decides at a time: it leads while it holds elastrain/head with a lease
// (kDefaultLeaderTtl; elastic/leadership.h); others stand by and take over when that lease
// ends. Every write of the leader is guarded by its key, so a head that lost the lead
// (cut off from the store) writes nothing more: RunJob returns FailedPrecondition
// (kLostLead) and the next RunJob stands by.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "config/config.h"
#include "wire/protocol.h"
#include "store/signed_records.h"
#include "store/store.h"

namespace elastrain {

inline constexpr std::chrono::milliseconds kDefaultLeaderTtl{3000};
// Longest pause between two decisions when nothing changes: the policy's timeouts
// (heartbeat, collective, resource wait, cool-downs: all seconds or more) are checked
// then. Every change in the store (a report, a lease expiry, a submission) wakes the
// controller at once, so this bounds only how late a timeout is noticed. Each decision
// reads the whole cluster view (in cluster mode ~8 etcd requests): at 100 ms this was
// most of the head's and etcd's CPU while training (issue 20).
inline constexpr std::chrono::milliseconds kDefaultDecisionTick{1000};

struct ControllerOptions {
  std::chrono::milliseconds leader_ttl = kDefaultLeaderTtl;
  std::chrono::milliseconds tick = kDefaultDecisionTick;
  // The head's own public key (store/signed_records.h): a job spec it did not sign (put
  // in the store by anyone else) is ignored with a logged reason, never run. Null: any.
  std::shared_ptr<const VerifyKey> spec_key;
  // Who this head is (HeadRecord in keys::Head()): "" for DefaultHeadId(); its API's URL.
  std::string head_id, head_url;
  // Writes head_elected (and head_lost for the head it replaces) into each job's events:
  // `elastrain head`, where several heads may share a cluster.
  bool announce_lead = false;
};

class Controller {
 public:
  Controller(std::shared_ptr<Store> store, ControllerOptions opt = {});
  ~Controller();
  // Drives the job in the store until it reaches a terminal state, and returns its
  // record; or returns early (the job still running) once `stop` is set. Waits for a
  // job to be submitted, and for the leader lock, first.
  Result<JobRecord> RunJob(const std::atomic<bool>& stop);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace elastrain
