// Process groups: collectives among training workers over Gloo's TCP transport.
//
// A ProcessGroup is one Gloo context: `size` ranks that met under a key prefix of a
// rendezvous store (a FileStore in the run directory in embedded mode, etcd in cluster
// mode; both speak gloo::rendezvous::Store). A worker may hold several groups at once
// (all ranks, its tensor-parallel peers, its data-parallel peers); they share one TCP
// device per bind address. Every blocking call is bounded by GroupOptions::timeout, and
// every Gloo exception is turned into a Status here, at the module edge:
//   DeadlineExceeded  a peer did not show up or stalled past the timeout;
//   Unavailable       a peer's connection closed or reset (its process died);
//   Cancelled         GroupOptions::cancelled turned true (the generation was aborted);
//   FailedPrecondition  the group already failed once (see below);
//   InvalidArgument   bad arguments (nothing was sent).
// After any communication failure the group is *broken*: Gloo cannot resynchronise a
// half-finished collective, so this group closes its connections (which makes the other
// ranks fail fast instead of waiting out their timeout) and refuses further calls. The
// caller ends the generation and connects a fresh group under a new prefix.
// Every pair's TCP connection is made by the connection guard (comm/gloo_guard.h): it
// reaches Gloo only after proving it comes from a rank of the same group, so a stranger
// connecting to a worker's port cannot take a pair or fail the Connect.
// Connect (with peers) and every collective that reaches the network enter and leave the
// worker's CollectiveTracker when GroupOptions::tracker names one (comm/collective_mark.h):
// which collective this rank is in, and how long collectives blocked it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/collective_mark.h"
#include "comm/rendezvous_store.h"  // the stores Connect meets through
#include "comm/ring_collectives.h"
#include "common/status.h"

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}  // namespace rendezvous
}  // namespace gloo

namespace elastrain {

// collective_timeout's default: long enough for a slow first step or a checkpoint
// barrier on a loaded machine, short enough that a stalled peer ends the generation.
inline constexpr std::chrono::milliseconds kDefaultCollectiveTimeout{60000};
// How often a group looks at GroupOptions::cancelled.
inline constexpr std::chrono::milliseconds kCancelPoll{50};

struct GroupOptions {
  // Bound on every collective, end to end, and on each phase of Connect: all store waits
  // share one deadline of this length; the TCP handshakes, then a closing barrier, get as
  // long again each (they only wait that long for a peer that published its address and
  // then vanished). So Connect gives up within ~timeout when a peer never shows up and
  // within 3x timeout in the worst case. Must be > 0.
  std::chrono::milliseconds timeout = kDefaultCollectiveTimeout;
  // Address of the interface to bind and to advertise to peers. Loopback for embedded
  // mode; the host's cluster-facing address when ranks span hosts.
  std::string hostname = "127.0.0.1";
  // Optional liveness probe, e.g. "rank 2 (pid 1234) is gone". Called (on the failing
  // thread, after the failure) when Connect or a collective fails, so that the error
  // names the lost peer rather than only the neighbour whose socket closed. Should
  // return quickly; "" when it knows nothing.
  std::function<std::string()> describe_lost_peers;
  // Optional: polled every kCancelPoll while Connect waits for peers' keys and, by a
  // watcher thread of the group, for as long as the group lives; true makes Connect give
  // up at once, and ends a collective already blocked on a peer (a frozen or cut-off
  // host) within kCancelPoll with Cancelled, instead of at the timeout (e.g. the
  // generation was aborted). Called from that thread: must be thread-safe and quick.
  std::function<bool()> cancelled;
  // Optional: the worker's collective tracker (comm/collective_mark.h). Connect (with
  // peers) and every collective that reaches the network enter it and leave it, so it
  // knows which collective this rank is in and how long collectives blocked it. Not
  // owned; must outlive the group (or be detached first, set_tracker(nullptr)).
  CollectiveTracker* tracker = nullptr;
};

// Thread-safety: one thread at a time per group (collectives are blocking and must be
// issued in the same order on every rank). Distinct groups may be used from distinct
// threads. Buffers are caller-owned and only touched during the call.
class ProcessGroup {
 public:
  // Joins the group `prefix` (e.g. "gen/3/dp1") of `store` as `rank` of `size`. Every
  // rank must pass the same prefix, size and timeout. A prefix names one group once:
  // reusing it in the same store fails (Gloo's stores refuse to overwrite a key). Returns
  // OK only once every rank has connected and passed a barrier. size == 1 needs no store
  // traffic and no network (store may then be null).
  static Result<std::unique_ptr<ProcessGroup>> Connect(
      std::shared_ptr<gloo::rendezvous::Store> store, const std::string& prefix, int rank,
      int size, const GroupOptions& opt = {});
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& prefix() const { return prefix_; }
  std::chrono::milliseconds timeout() const { return opt_.timeout; }
  // Seconds spent inside successful collectives since Connect (including waiting for
  // slower peers).
  double busy_seconds() const { return busy_seconds_; }
  // The tracker later calls enter (GroupOptions::tracker; null: none). Called by the
  // thread that uses the group, e.g. before handing the group to a thread of its own
  // whose collectives must not count as this worker's.
  void set_tracker(CollectiveTracker* tracker) { tracker_ = tracker; }
  // True after a communication failure; every later call returns FailedPrecondition.
  bool broken() const { return !first_error_.empty(); }

  // data (n): in-place sum over ranks; every rank ends with the same values.
  Status AllReduceSum(float* data, size_t n);
  Status AllReduceSum(double* data, size_t n);  // e.g. loss and token-count sums
  // Same result as AllReduceSum, issued as ceil(n / bucket_elems) collectives (each
  // bounded by the timeout), so that a later version can overlap buckets with backward
  // compute.
  Status AllReduceSumBucketed(float* data, size_t n, size_t bucket_elems);
  // in (n_per_rank) -> out (size * n_per_rank), rank-major: out[r*n_per_rank + i] is
  // rank r's in[i]. `in` must not overlap `out`.
  Status AllGather(const float* in, size_t n_per_rank, float* out);
  Status AllGather(const int64_t* in, size_t n_per_rank, int64_t* out);
  // in (size * n_per_rank) -> out (n_per_rank): out = sum over ranks of this rank's
  // chunk in[rank*n_per_rank, (rank+1)*n_per_rank). A ring: each rank sends
  // (size-1)*n_per_rank floats, half of what allreduce-then-copy would.
  Status ReduceScatterSum(const float* in, float* out, size_t n_per_rank);
  // data (n): root's values are copied to every rank.
  Status Broadcast(float* data, size_t n, int root);
  Status Broadcast(int64_t* data, size_t n, int root);
  // Returns when every rank has entered the barrier (or fails at the timeout).
  Status Barrier();

  // Point to point: `bytes` at `data` to or from rank `peer` of this group (not this rank).
  struct Transfer {
    int peer = 0;
    void* data = nullptr;
    size_t bytes = 0;
  };
  // Posts every send and every receive at once and waits for all of them, within one
  // timeout. A sender and its receiver must list the transfers between them in the same
  // order (the k-th send to a peer meets that peer's k-th receive from this rank, and
  // they must have the same size); empty ones move nothing but keep their place. Every
  // rank of the group calls Exchange the same number of times, in the same order as its
  // other collectives (a rank with nothing to move passes empty lists), because each call
  // takes the group's next tag.
  Status Exchange(const std::vector<Transfer>& sends, const std::vector<Transfer>& recvs);

 private:
  ProcessGroup(std::string prefix, int rank, int size, GroupOptions opt,
               std::shared_ptr<gloo::Context> ctx);
  // Runs `body` (which talks to Gloo) as a collective of `kind` (the tracker's) and
  // converts whatever it throws into a Status naming `op`; marks the group broken and
  // closes its connections on failure.
  template <typename Body>
  Status Run(CollectiveKind kind, const std::string& op, Body&& body);
  Status CheckUsable(const std::string& op) const;
  Status BroadcastBytes(void* data, size_t n, size_t elem_size, int root, const char* op);
  Status AllGatherBytes(const void* in, size_t n_per_rank, size_t elem_size, void* out,
                        const char* op);
  // A fresh Gloo tag per collective, identical on every rank since all ranks issue the
  // same sequence; it keeps concurrent collectives apart once buckets overlap.
  uint32_t NextTag() { return next_tag_++; }
  // The next collective's call: its deadline (now + timeout), tag and this group's waits.
  ring::Call NewCall() { return ring::Call{*ctx_, ring::Clock::now() + opt_.timeout, NextTag(), waits_}; }
  // The watcher thread: polls opt_.cancelled and, once it is true, fails every pair of the
  // context and aborts every wait of waits_, which ends a collective blocked on any peer.
  void WatchForCancel();
  void StopWatcher();

  const std::string prefix_;
  const int rank_;
  const int size_;
  const GroupOptions opt_;
  std::shared_ptr<gloo::Context> ctx_;  // null when size_ == 1
  uint32_t next_tag_ = 1;  // 0 is Connect's closing barrier
  double busy_seconds_ = 0;
  CollectiveTracker* tracker_;  // opt_.tracker until set_tracker
  std::string first_error_;  // set once, by the first failed collective
  std::thread watcher_;      // runs while opt_.cancelled is set and the group has peers
  std::mutex watcher_mu_;
  std::condition_variable watcher_cv_;
  bool watcher_stop_ = false;            // GUARDED_BY(watcher_mu_)
  // The buffers collectives wait on (comm/ring_collectives.h): failing a pair does not
  // wake a send Gloo has begun to write, so a cancel aborts these waits too.
  ring::WaitList waits_;
  std::atomic<bool> cancelled_{false};   // the watcher failed the pairs
};

}  // namespace elastrain
