// Saves and restores a rank's share of the training state (ckpt/ is the storage format).
//
// Saving (every checkpoint_period steps, or with checkpoint_period=auto every
// auto_period() steps since the last save, and at the end): the rank copies the state it
// owns -- its FSDP chunks of the tensor-local parameters and AdamW moments -- into memory
// (the only time the step loop is blocked), then a background thread writes its three
// shard files. Data replicas (data coordinate > 0) hold the same shards and write
// nothing. Each writer leaves `shards-<rank>.json` (its pieces and checksums, or its
// error) beside its files; the chief's thread waits for all of them, writes the manifest,
// COMMITTED, switches LATEST and prunes old checkpoints. No collective is used in the
// background, so training's collectives never race with a save. One save is in flight
// at a time: the next one first waits for it.
//
// Restoring: every rank reads exactly the slices it owns on the CURRENT mesh from the
// pieces of whatever mesh saved them. All ranks agree on the checkpoint (an allreduce of
// failures): if any rank finds a bad checksum, all fall back to the next older one.
#pragma once

#include <cstdint>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/format.h"
#include "plan/mesh.h"
#include "comm/process_group.h"
#include "config/config.h"
#include "common/events.h"
#include "train/train_state.h"

namespace elastrain {

struct RestoreResult {
  int64_t step = 0;     // steps already done (0: fresh start)
  std::string source;   // the checkpoint directory, or "" for a fresh start
  bool full_state = false;
};

// Floats that a Checkpointer's snapshot needs at most for a rank whose state has
// `shard_size` floats per kind: what a buffer prepared ahead of it should hold.
size_t CheckpointSnapshotFloats(int64_t shard_size);

class Checkpointer {
 public:
  // `snapshot`: a buffer an earlier Checkpointer of this process used (snapshot_buffer()),
  // or one of CheckpointSnapshotFloats, reused when it is large enough, so that its pages
  // are not faulted in again; may be null.
  Checkpointer(const TrainConfig& cfg, std::string run_dir, int rank, const Mesh& mesh, MeshCoords coords,
               TrainState* state, ProcessGroup* world, EventLog* events,
               std::shared_ptr<FloatBuffer> snapshot = nullptr);
  ~Checkpointer();  // waits for a save in flight
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // The run directory's latest committed checkpoint, else load_full_state_path, else
  // load_parameters_path (parameters only, step 0), else a fresh start. Collective.
  Result<RestoreResult> Restore();
  // Saves if `step` (steps done) is due: a multiple of checkpoint_period (auto: at least
  // auto_period() steps after the last save, or after the step set by StartPeriodAt), or
  // the last step with save_checkpoint_on_completion. Returns the seconds the caller was
  // blocked.
  Result<double> MaybeSave(int64_t step, int64_t total_steps, const ckpt::DataState& data);
  // Saves `step` now unless it was just saved (a stop at a step boundary). Same return.
  Result<double> SaveNow(int64_t step, const ckpt::DataState& data);
  // The generation failed: a save in flight gives up waiting for other ranks' shards
  // (they may be gone) and removes its partial directory. Call before destruction.
  void Abort() { aborted_ = true; }
  // Called (on the writer thread) with the step of each checkpoint the chief commits.
  void set_on_commit(std::function<void(int64_t)> f) { on_commit_ = std::move(f); }
  // Asked (on the writer thread) before the chief writes a manifest, COMMITTED or LATEST:
  // anything but OK leaves the run directory untouched (GenerationControl::still_current).
  void set_fence(std::function<Status()> f) { fence_ = std::move(f); }
  // The generation that saves, named in checkpoint_saved events.
  void set_generation(int64_t generation) { generation_ = generation; }
  // The snapshot buffer, for the next generation's Checkpointer (after this one is done).
  std::shared_ptr<FloatBuffer> snapshot_buffer() const { return snapshot_; }
  // The step LATEST points at (committed), or -1.
  int64_t LatestCommittedStep() const;
  // Removes checkpoint directories that are not committed: saves abandoned by an earlier
  // generation. Call only when no save of this run is in flight (generation start).
  void RemoveUncommitted();
  // The trainer calls this before it changes the state (the optimizer update): it waits
  // until a save in flight has copied the state out. Adds the wait to the stall.
  void WaitForSnapshot();
  double take_snapshot_wait() { double w = snapshot_wait_; snapshot_wait_ = 0; return w; }
  // Waits for the save in flight; its error if it failed and the policy is `fail`.
  Status Flush();
  // checkpoint_period=auto: the period in force, which every rank must agree on (the
  // trainer sets it from the chief's proposal), counted from `step` until the first save.
  void SetAutoPeriod(int64_t period) { auto_period_ = period; }
  int64_t auto_period() const { return auto_period_; }
  void StartPeriodAt(int64_t step) { period_start_ = step; }
  // Chief: the seconds from the start of a save (the step loop reaching it) to its commit,
  // for each save committed since the last call; nullopt if none. Thread-safe.
  std::optional<double> TakeCommittedSaveSeconds();
  // Seconds the last save blocked the loop (snapshot + waiting for the previous one).
  double last_stall_seconds() const { return last_stall_; }
  // The part of it spent waiting for the previous save to finish writing.
  double last_wait_seconds() const { return last_wait_; }

 private:
  Status Save(int64_t step, const ckpt::DataState& data);
  Status RestoreFrom(const std::string& dir, bool full_state, int64_t* step);
  // Clears the way after a restore from `step`: checkpoints newer than it go, except a
  // damaged one (its manifest does not validate, or it is in `unreadable`: its data did
  // not restore), which is moved aside (ckpt::QuarantineCheckpoint), never deleted; an
  // error if one cannot be moved.
  Status RemoveNewerThan(int64_t step, const std::vector<std::string>& unreadable);
  // Runs in the background: write this rank's files, then (chief) commit.
  Status WriteInBackground(int64_t step, std::string dir, std::shared_ptr<FloatBuffer> snapshot,
                           ckpt::DataState data, double stall_seconds, double waited_seconds,
                           std::chrono::steady_clock::time_point started);
  Status CommitAsChief(int64_t step, const std::string& dir, const ckpt::DataState& data);
  // This rank's pieces (what it owns and writes), in OwnedRuns order; replicated tensors
  // are written by tensor rank 0 only. `writes` keeps only what this rank saves.
  std::vector<ckpt::PieceSpec> Pieces(bool for_saving, std::vector<int64_t>* shard_offsets) const;
  bool writes() const { return coords_.data == 0; }
  bool chief() const { return rank_ == 0; }

  const TrainConfig& cfg_;
  const std::string run_dir_;
  const int rank_;
  const Mesh mesh_;
  const MeshCoords coords_;
  TrainState* state_;
  ProcessGroup* world_;
  EventLog* events_;
  std::thread pending_;
  std::shared_ptr<FloatBuffer> snapshot_;  // the in-memory copy a save writes from
  std::mutex copy_mu_;
  std::condition_variable copy_cv_;
  bool copy_done_ = true;  // GUARDED_BY(copy_mu_): the snapshot holds the state of the save
  // The snapshot copy, in chunks that the writer thread and the trainer's threads share.
  // The snapshot holds, per kind, the pieces this rank writes back to back in file order
  // (a shard's padding left out), each kind's part page-aligned: the shard files' data,
  // which the writer hands to the disk without another copy.
  void CopyChunks();
  struct CopyRun {
    int64_t src = 0, dst = 0, n = 0;  // floats: shard offset, offset in the kind's part, count
  };
  std::vector<CopyRun> copy_runs_;  // the pieces saved, cut to chunks; set by the constructor
  std::vector<int64_t> packed_offsets_;  // each saved piece's offset in a kind's part
  int64_t packed_size_ = 0;              // floats of one kind's part
  std::atomic<int64_t> copy_next_{0};
  int64_t copy_finished_ = 0;  // GUARDED_BY(copy_mu_)
  int64_t copy_total_ = 0, copy_chunks_per_kind_ = 0;
  double snapshot_wait_ = 0;
  Status pending_status_;  // written by the background thread, read after join
  std::atomic<bool> aborted_{false};
  std::function<void(int64_t)> on_commit_;
  std::function<Status()> fence_;
  int64_t generation_ = 0;
  int64_t last_saved_step_ = -1;
  double last_stall_ = 0, last_wait_ = 0;
  int64_t auto_period_ = 0, period_start_ = 0;
  std::mutex committed_mu_;
  std::optional<double> committed_save_seconds_;  // GUARDED_BY(committed_mu_)
};

}  // namespace elastrain
