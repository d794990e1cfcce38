// The RAM tier of a sharded job, in one worker process (issue #18; the decisions are
// plan/ram_tier.h, the holder's double buffer train/peer_snapshot.h):
//
//   - every memory_snapshot_period steps the trainer hands Send() its shard (params,
//     adam_m, adam_v after the step's update); a thread sends it to the rank's buddies
//     over a group of its own, and receives the shards of the ranks it is a buddy of into
//     their SnapshotSlots, while the next step computes;
//   - before the next update the trainer calls Wait(): the thread reads the live buffers,
//     so they must not change under it;
//   - once a copy has gone out whole, the thread also keeps this rank's own shard of that
//     step (own copy): while the next step's copy is on the wire, the live state is
//     already one step newer, and a failure that tears another rank's copy then needs
//     every shard of the step before (a restore redoes one step instead of going to disk);
//   - the process keeps what it holds across generations (CarriedState::ram): after a
//     failure the controller learns Held() from the worker's report, and a restore from
//     peers reads Find().
// A copy is tagged with its step and a checksum of the sender's data (SnapshotChecksum3),
// sent last; a copy whose sender died halfway through, or whose bytes hash wrong, is never
// used and never replaces the last complete one.
// Thread-safety: one trainer thread calls every method; the sender thread is internal.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/process_group.h"
#include "train/peer_snapshot.h"
#include "wire/protocol.h"

namespace elastrain {

// The shard id of mesh coordinates (fsdp, tensor): the rank at data coordinate 0.
inline int ShardId(int fsdp_coord, int tensor_coord, int tensor) { return fsdp_coord * tensor + tensor_coord; }

struct RamTierStats {
  int64_t snapshots = 0;       // copies sent (each to every buddy)
  int64_t bytes_sent = 0;
  double send_seconds = 0;     // in the thread: checksum + transfer
  double wait_seconds = 0;     // the trainer waited in Wait()
  int64_t failed = 0;          // exchanges that failed (a peer died or the group was cancelled)
};

class RamTierCopies {
 public:
  RamTierCopies() = default;
  ~RamTierCopies();
  RamTierCopies(const RamTierCopies&) = delete;
  RamTierCopies& operator=(const RamTierCopies&) = delete;

  // One generation's snapshots.
  struct Setup {
    int64_t generation = -1;
    int own_shard = -1;                  // this rank's shard id
    int64_t shard_size = 0;              // floats of each of the three shard buffers
    std::vector<int> send_to;            // this rank's buddies (ranks of the group)
    std::vector<std::pair<int, int>> receive_from;  // (rank, its shard id) of ranks this one is a buddy of
    int rank = -1;                       // this rank (the context of fault kill_mid_snapshot)
  };
  // Forgets every copy of an earlier generation and starts this one's thread on `group`
  // (its own group: the thread uses it while the trainer uses the others).
  void Start(const Setup& setup, std::unique_ptr<ProcessGroup> group);
  // The state after `step` is in the three buffers; they must not change before Wait().
  void Send(int64_t step, const float* params, const float* adam_m, const float* adam_v);
  // Waits for the copy in flight (sent, and this rank's receives done). Returns the seconds waited.
  double Wait();
  // Ends the generation's snapshots: waits up to `grace` for the copy in flight, then
  // cancels it (a dead or frozen peer), and joins the thread. Idempotent.
  void Stop(std::chrono::milliseconds grace);
  // Drops every copy held (a generation that starts without the RAM tier).
  void Clear();

  // The generation whose shards Held() and Find() are (-1: none).
  int64_t generation() const { return generation_; }
  // Every verified copy this process holds: other ranks' shards (complete and previous)
  // and its own copy.
  std::vector<HeldCopy> Held() const;
  // A held copy of `shard` at `step`: 3 x shard_size floats (params | adam_m | adam_v), or
  // null (*floats then 0).
  const float* Find(int shard, int64_t step, size_t* floats) const;
  const RamTierStats& stats() const { return stats_; }
  // For the snapshot group's GroupOptions::cancelled: true while Stop cancels the copy in
  // flight. Thread-safe.
  bool cancelling() const { return cancel_.load(); }

 private:
  struct Job {
    int64_t step = -1;
    const float* p = nullptr;
    const float* m = nullptr;
    const float* v = nullptr;
  };
  void Loop();
  void Exchange(const Job& job);
  void KeepOwn(const Job& job);

  int64_t generation_ = -1;
  Setup setup_;
  std::unique_ptr<ProcessGroup> group_;
  std::map<int, std::pair<int, SnapshotSlot>> held_;  // sender rank -> (its shard, slot)
  RamTierStats stats_;
  bool broken_ = false;  // an exchange failed: no more copies this generation
  std::vector<float> own_;  // this rank's shard at own_step_ (params | adam_m | adam_v)
  int64_t own_step_ = -1;

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool has_job_ = false, busy_ = false, quit_ = false;  // GUARDED_BY(mu_)
  Job job_;                                             // GUARDED_BY(mu_)
  std::atomic<bool> cancel_{false};                     // the group's cancelled() probe
};

// Whether a generation on `mesh` keeps a RAM tier: a sharded mesh (fsdp or tensor > 1)
// of more than one rank with memory_snapshot_period > 0.
bool RamTierActive(const class Mesh& mesh, int64_t memory_snapshot_period);

}  // namespace elastrain
