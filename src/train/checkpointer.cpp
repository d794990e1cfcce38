#include "train/checkpointer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "ckpt/checkpoint.h"
#include "common/files.h"
#include "common/log.h"
#include "train/shard_pieces.h"
#include "wire/events.h"

namespace elastrain {

namespace {
using Clock = std::chrono::steady_clock;
constexpr int kKinds = 3;  // params, adam_m, adam_v
constexpr int64_t kCopyChunk = int64_t{1} << 20;  // floats per chunk of the snapshot copy
// Floats per kind in the snapshot for `packed` floats of pieces: each kind's part starts
// page-aligned (the buffer is mmap'd), so that the shard file's data (which starts
// 4096-aligned) and its source are aligned alike, as direct I/O without a copy needs.
int64_t SnapshotStride(int64_t packed) { return (packed + 1023) / 1024 * 1024; }
std::string ShardsJson(const std::string& dir, int rank) { return fmt::format("{}/shards-{:05d}.json", dir, rank); }
}  // namespace

// The pieces saved are at most the shard (less its padding and, on tensor ranks > 0, the
// replicated tensors).
size_t CheckpointSnapshotFloats(int64_t shard_size) { return static_cast<size_t>(kKinds * SnapshotStride(shard_size)); }

Checkpointer::Checkpointer(const TrainConfig& cfg, std::string run_dir, int rank, const Mesh& mesh,
                           MeshCoords coords, TrainState* state, ProcessGroup* world, EventLog* events,
                           std::shared_ptr<FloatBuffer> snapshot)
    : cfg_(cfg),
      run_dir_(std::move(run_dir)),
      rank_(rank),
      mesh_(mesh),
      coords_(coords),
      state_(state),
      world_(world),
      events_(events),
      auto_period_(cfg.checkpoint_period) {
  std::vector<int64_t> offsets;
  const std::vector<ckpt::PieceSpec> pieces = Pieces(/*for_saving=*/true, &offsets);
  for (size_t i = 0; i < pieces.size(); ++i) {
    packed_offsets_.push_back(packed_size_);
    for (int64_t at = 0; at < pieces[i].size(); at += kCopyChunk)
      copy_runs_.push_back({offsets[i] + at, packed_size_ + at, std::min(kCopyChunk, pieces[i].size() - at)});
    packed_size_ += pieces[i].size();
  }
  // Fault the snapshot's pages in now, during initialisation, not in the first save's stall.
  const size_t want = static_cast<size_t>(kKinds * SnapshotStride(packed_size_));
  if (snapshot && snapshot->size() >= want) snapshot_ = std::move(snapshot);
  else if (cfg_.enable_checkpointing && writes()) snapshot_ = std::make_shared<FloatBuffer>(want);
}

Checkpointer::~Checkpointer() {
  if (pending_.joinable()) pending_.join();
}

std::vector<ckpt::PieceSpec> Checkpointer::Pieces(bool for_saving, std::vector<int64_t>* shard_offsets) const {
  return PiecesOf(state_->OwnedRuns(), state_->local_layout(), state_->sharding(), state_->tensor_rank(), for_saving,
                  shard_offsets);
}

// ---------------------------------------------------------------- saving
Result<double> Checkpointer::MaybeSave(int64_t step, int64_t total_steps, const ckpt::DataState& data) {
  last_stall_ = 0;
  last_wait_ = 0;
  if (!cfg_.enable_checkpointing || step == last_saved_step_) return 0.0;
  const bool periodic = cfg_.checkpoint_period_auto
                            ? step - std::max(last_saved_step_, period_start_) >= std::max<int64_t>(auto_period_, 1)
                            : step % cfg_.checkpoint_period == 0;
  const bool due = periodic || (step == total_steps && cfg_.save_checkpoint_on_completion);
  if (!due) return 0.0;
  auto t0 = Clock::now();
  ELASTRAIN_RETURN_IF_ERROR(Save(step, data));
  last_stall_ = SecondsSince(t0);
  return last_stall_;
}

Result<double> Checkpointer::SaveNow(int64_t step, const ckpt::DataState& data) {
  if (!cfg_.enable_checkpointing || step == last_saved_step_) return 0.0;
  auto t0 = Clock::now();
  ELASTRAIN_RETURN_IF_ERROR(Save(step, data));
  last_stall_ = SecondsSince(t0);
  return last_stall_;
}

int64_t Checkpointer::LatestCommittedStep() const {
  auto latest = ckpt::LatestCommitted(run_dir_);
  auto listed = ckpt::ListCheckpoints(run_dir_);
  if (!latest.ok() || !listed.ok()) return -1;
  for (const auto& c : listed.value())
    if (std::filesystem::path(c.dir) == std::filesystem::path(latest.value())) return c.step;
  return -1;
}

void Checkpointer::RemoveUncommitted() {
  auto listed = ckpt::ListCheckpoints(run_dir_);
  if (!listed.ok()) return;
  for (const auto& c : listed.value()) {
    if (c.committed) continue;
    Status st = ckpt::RemovePartial(c.dir);
    if (st.ok()) LOG_INFO("removed {} (a save an earlier generation did not finish)", c.dir);
  }
}

void Checkpointer::CopyChunks() {
  const int64_t stride = SnapshotStride(packed_size_);
  const float* src[kKinds] = {state_->shard_params(), state_->adam_m(), state_->adam_v()};
  for (int64_t c = copy_next_++; c < copy_total_; c = copy_next_++) {
    const int k = static_cast<int>(c / copy_chunks_per_kind_);
    const CopyRun& r = copy_runs_[c % copy_chunks_per_kind_];
    std::memcpy(snapshot_->data() + k * stride + r.dst, src[k] + r.src, sizeof(float) * r.n);
    std::lock_guard<std::mutex> lock(copy_mu_);
    if (++copy_finished_ == copy_total_) copy_cv_.notify_all();
  }
}

void Checkpointer::WaitForSnapshot() {
  if (!pending_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(copy_mu_);
    if (copy_done_) return;
  }
  // The state is about to change: copy what the background thread has not yet, with
  // every training thread, then wait for its last chunk.
  auto t0 = Clock::now();
#pragma omp parallel
  CopyChunks();
  std::unique_lock<std::mutex> lock(copy_mu_);
  copy_cv_.wait(lock, [this] { return copy_done_; });
  snapshot_wait_ += SecondsSince(t0);
}

Status Checkpointer::Flush() {
  if (pending_.joinable()) pending_.join();
  Status st = pending_status_;
  pending_status_ = Status::OK();
  if (!st.ok() && cfg_.checkpoint_failure_policy == CheckpointFailurePolicy::kFail) return st;
  return Status::OK();
}

std::optional<double> Checkpointer::TakeCommittedSaveSeconds() {
  std::lock_guard<std::mutex> lock(committed_mu_);
  std::optional<double> s = committed_save_seconds_;
  committed_save_seconds_.reset();
  return s;
}

Status Checkpointer::Save(int64_t step, const ckpt::DataState& data) {
  auto t0 = Clock::now();
  ELASTRAIN_RETURN_IF_ERROR(Flush());  // one save in flight: wait for the previous one
  const double waited = SecondsSince(t0);
  last_wait_ = waited;
  last_saved_step_ = step;
  // One buffer for the life of the run: its pages are faulted in once, not per save
  // (a fresh 1.5 GB allocation costs seconds of page faults). The previous save is done
  // with it (Flush above).
  if (!snapshot_) snapshot_ = std::make_shared<FloatBuffer>(writes() ? kKinds * SnapshotStride(packed_size_) : 0);
  auto snapshot = snapshot_;  // the constructor sized it
  const std::string dir = ckpt::CheckpointDir(run_dir_, step);
  const double stall = SecondsSince(t0);  // the copy's own wait is added by WaitForSnapshot
  {
    std::lock_guard<std::mutex> lock(copy_mu_);
    copy_done_ = false;
  }
  // The copy runs in the background too: the state does not change until the next
  // optimizer update, which waits for it (WaitForSnapshot), so forward and backward of
  // the next step overlap the copy.
  copy_chunks_per_kind_ = static_cast<int64_t>(copy_runs_.size());
  copy_total_ = writes() ? kKinds * copy_chunks_per_kind_ : 0;
  copy_next_ = 0;
  copy_finished_ = 0;
  pending_ = std::thread([this, step, dir, snapshot, data, stall, waited, t0] {
    CopyChunks();
    {
      std::unique_lock<std::mutex> lock(copy_mu_);  // the trainer may still copy its last chunks
      copy_cv_.wait(lock, [this] { return copy_finished_ == copy_total_; });
      copy_done_ = true;
    }
    copy_cv_.notify_all();
    // The writer yields the cores to the training threads when both want them.
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
    pending_status_ = WriteInBackground(step, dir, snapshot, data, stall, waited, t0);
    if (!pending_status_.ok()) {
      LOG_ERROR("checkpoint at step {} failed: {}", step, pending_status_.message());
      if (chief()) events_->Emit(CheckpointFailedEvent{step, pending_status_.message()});
    }
  });
  if (!cfg_.async_checkpointing) return Flush();
  return Status::OK();
}

Status Checkpointer::WriteInBackground(int64_t step, std::string dir, std::shared_ptr<FloatBuffer> snapshot,
                                       ckpt::DataState data, double stall, double waited,
                                       Clock::time_point started) {
  auto t0 = Clock::now();
  if (writes()) {
    std::vector<int64_t> offsets;
    const std::vector<ckpt::PieceSpec> pieces = Pieces(/*for_saving=*/true, &offsets);
    const int64_t stride = SnapshotStride(packed_size_);
    // The three files in parallel: several writes in flight keep a fast disk busy while
    // each writer copies and hashes its next block. The threads inherit this one's
    // lower priority.
    std::vector<Result<ckpt::ShardFileInfo>> written(kKinds, Status::Internal("not written"));
    std::vector<std::thread> writers;
    for (int k = 0; k < kKinds; ++k)
      writers.emplace_back([&, k] {
        std::vector<const float*> ptrs;
        for (int64_t off : packed_offsets_) ptrs.push_back(snapshot->data() + k * stride + off);
        const ckpt::StateKind kind = ckpt::kAllKinds[k];
        written[k] = ckpt::WriteShardFile(dir + "/" + ckpt::ShardFileName(kind, rank_), kind, pieces, ptrs);
      });
    for (std::thread& t : writers) t.join();
    std::vector<ckpt::ShardFileInfo> infos;
    Status failed;
    for (int k = 0; k < kKinds && failed.ok(); ++k) {
      if (written[k].ok()) infos.push_back(std::move(written[k].value()));
      else failed = written[k].status();
    }
    // The chief learns the outcome from this file, never through a collective.
    const std::string report = failed.ok() ? ckpt::ShardFileInfoToJson(infos)
                                           : nlohmann::json{{"error", failed.message()}}.dump();
    Status wrote = MakeDirs(dir);
    if (wrote.ok()) wrote = WriteFileAtomic(ShardsJson(dir, rank_), report);
    ELASTRAIN_RETURN_IF_ERROR(failed);
    ELASTRAIN_RETURN_IF_ERROR(wrote);
  }
  if (!chief()) return Status::OK();
  ELASTRAIN_RETURN_IF_ERROR(CommitAsChief(step, dir, data));
  // Written, committed and named by LATEST: the save's own time. Removing old
  // checkpoints is timed apart (unlinking a 1.5 GB checkpoint takes ~1 s on ext4).
  const double write_seconds = SecondsSince(t0);
  // From the step loop reaching the save to its commit, less the wait for the previous
  // save (which is that save's cost, already counted).
  const double save_seconds = SecondsSince(started) - waited;
  auto pruned = Clock::now();
  ELASTRAIN_RETURN_IF_ERROR(ckpt::ApplyRetention(run_dir_, static_cast<int>(cfg_.max_num_checkpoints_to_keep), step));
  const double prune_seconds = SecondsSince(pruned);
  {
    std::lock_guard<std::mutex> lock(committed_mu_);
    committed_save_seconds_ = save_seconds;
  }
  CheckpointSavedEvent saved;
  saved.step = step;
  saved.generation = generation_;
  saved.dir = dir;
  saved.write_seconds = write_seconds;
  saved.prune_seconds = prune_seconds;
  saved.stall_seconds = stall;
  saved.snapshot_seconds = stall - waited;
  saved.wait_seconds = waited;
  saved.save_seconds = save_seconds;
  events_->Emit(saved);
  // async_checkpointing=false: Save waited for this thread, and the step with it.
  LOG_INFO("checkpoint saved: {} ({:.2f}s{}, {:.2f}s of it removing old checkpoints)", dir, SecondsSince(t0),
           cfg_.async_checkpointing ? " in the background"
                                    : ", synchronously: async_checkpointing=false, the step waited for it;",
           prune_seconds);
  if (on_commit_) on_commit_(step);
  return Status::OK();
}

Status Checkpointer::CommitAsChief(int64_t step, const std::string& dir, const ckpt::DataState& data) {
  ckpt::Manifest m;
  m.step = step;
  m.config_yaml = ConfigToYaml(cfg_);
  m.mesh = {mesh_.data(), mesh_.fsdp(), mesh_.tensor(), mesh_.world_size()};
  m.data = data;
  m.rng_state = nlohmann::json{{"init_weights_seed", cfg_.init_weights_seed}}.dump();
  // Every writer (data coordinate 0) reports; wait for all of them, bounded.
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(
                                           std::max(60.0, 2 * cfg_.collective_timeout) * 1000));
  Status failed;
  for (int r = 0; r < mesh_.world_size() && failed.ok(); ++r) {
    if (mesh_.Coords(r).data != 0) continue;
    const std::string path = ShardsJson(dir, r);
    while (!FileExists(path)) {
      if (aborted_) {
        failed = Status::Unavailable(fmt::format("{}: abandoned, the generation failed before rank {} reported", dir, r));
        break;
      }
      if (Clock::now() > deadline) {
        failed = Status::DeadlineExceeded(fmt::format("{}: rank {} did not report its shards in time", dir, r));
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!failed.ok()) break;
    auto text = ReadFile(path);
    if (!text.ok()) {
      failed = text.status();
      break;
    }
    auto j = nlohmann::json::parse(text.value(), nullptr, false);
    if (j.is_object() && j.contains("error")) {  // a string unless the file is damaged
      failed = Status::IOError(
          fmt::format("rank {}: {}", r, j["error"].is_string() ? j["error"].get<std::string>() : j["error"].dump()));
      break;
    }
    auto infos = ckpt::ShardFileInfoFromJson(text.value());
    if (!infos.ok()) {
      failed = infos.status();
      break;
    }
    for (const auto& info : infos.value()) {
      failed = m.AddShard(info);
      if (!failed.ok()) break;
    }
  }
  // A chief whose generation is no longer current (cut off, fenced out) touches nothing:
  // a newer generation may be saving the same step into the same directory.
  if (failed.ok() && fence_) {
    Status may = fence_();
    if (!may.ok()) return Status::FailedPrecondition(fmt::format("{}: not committed: {}", dir, may.message()));
  }
  if (failed.ok()) failed = ckpt::WriteManifest(dir, m);
  if (failed.ok()) failed = ckpt::Commit(dir);
  if (!failed.ok()) {
    Status removed = ckpt::RemovePartial(dir);  // the previous checkpoint stays LATEST
    if (!removed.ok()) LOG_WARN("could not remove partial checkpoint: {}", removed.message());
    return failed;
  }
  for (int r = 0; r < mesh_.world_size(); ++r) std::filesystem::remove(ShardsJson(dir, r));
  if (fence_) {
    Status may = fence_();
    if (!may.ok()) return Status::FailedPrecondition(fmt::format("{}: LATEST not switched: {}", dir, may.message()));
  }
  return ckpt::SetLatest(run_dir_, step);
}

// ---------------------------------------------------------------- restoring
Status Checkpointer::RestoreFrom(const std::string& dir, bool full_state, int64_t* step) {
  ELASTRAIN_ASSIGN_OR_RETURN(ckpt::Manifest m, ckpt::ReadManifest(dir));
  for (size_t i = 0; i < state_->sharding().size(); ++i) {
    const TensorSharding& sh = state_->sharding()[i];
    const ckpt::TensorRecord* t = m.Find(sh.name);
    if (!t || t->global_shape != sh.global_shape)
      return Status::InvalidArgument(fmt::format(
          "{}: tensor {} is {} in the checkpoint but this model expects {}; the checkpoint is of another model", dir,
          sh.name, t ? ckpt::ShapeString(t->global_shape) : "missing", ckpt::ShapeString(sh.global_shape)));
  }
  std::vector<int64_t> offsets;
  const std::vector<ckpt::PieceSpec> want = Pieces(/*for_saving=*/false, &offsets);
  float* dst[kKinds] = {state_->shard_params(), state_->adam_m(), state_->adam_v()};
  // One reader per kind (its own files), in parallel: several reads in flight.
  std::vector<Status> read(kKinds);
  std::vector<std::thread> readers;
  for (int k = 0; k < (full_state ? kKinds : 1); ++k)
    readers.emplace_back([&, k] {
      for (size_t i = 0; i < want.size() && read[k].ok(); ++i)
        read[k] = ckpt::ReadTensorSlice(m, dir, ckpt::kAllKinds[k], want[i], dst[k] + offsets[i]);
    });
  for (std::thread& t : readers) t.join();
  for (const Status& st : read) ELASTRAIN_RETURN_IF_ERROR(st);
  *step = full_state ? m.step : 0;
  return Status::OK();
}

Status Checkpointer::RemoveNewerThan(int64_t step, const std::vector<std::string>& unreadable) {
  // Checkpoints after the one resumed from belong to an abandoned timeline; the next save
  // of those steps must not find their files. Removed before training starts, so before
  // any rank writes again. A damaged one is evidence for an operator: moved aside.
  auto listed = ckpt::ListCheckpoints(run_dir_);
  if (!listed.ok()) return Status::OK();
  for (const auto& c : listed.value()) {
    if (c.step <= step) continue;
    std::string damage;
    for (const std::string& u : unreadable)
      if (std::filesystem::path(u).lexically_normal() == std::filesystem::path(c.dir).lexically_normal())
        damage = "its data did not restore";
    if (damage.empty() && c.committed) {
      Status manifest = ckpt::ReadManifest(c.dir).status();
      if (!manifest.ok()) damage = "its manifest does not validate: " + manifest.message();
    }
    if (!damage.empty()) {  // damaged: moved aside, never deleted
      auto moved = ckpt::QuarantineCheckpoint(c.dir);
      if (!moved.ok())
        return Status::IOError(fmt::format("{}; the damaged checkpoint is kept, not deleted: move it away by hand "
                                           "and start again", moved.status().message()));
      LOG_WARN("moved {} to {} (newer than the checkpoint resumed from, and damaged: {})", c.dir, *moved, damage);
      continue;
    }
    std::error_code ec;
    std::filesystem::remove(c.dir + "/COMMITTED", ec);  // never half-removed yet valid-looking
    std::filesystem::remove_all(c.dir, ec);
    LOG_WARN("removed {} (newer than the checkpoint resumed from)", c.dir);
  }
  return Status::OK();
}

Result<RestoreResult> Checkpointer::Restore() {
  std::vector<std::string> candidates;
  bool full_state = true, fallback_allowed = false;
  // LATEST first (a committed checkpoint newer than LATEST never finished its save),
  // then older committed ones, newest first, to fall back to.
  auto listed = ckpt::ListCheckpoints(run_dir_);
  auto latest = ckpt::LatestCommitted(run_dir_);
  if (listed.ok() && latest.ok()) {
    int64_t latest_step = -1;
    for (const auto& c : listed.value())
      if (c.dir == latest.value() || std::filesystem::path(c.dir) == std::filesystem::path(latest.value()))
        latest_step = c.step;
    candidates.push_back(latest.value());
    for (auto it = listed->rbegin(); it != listed->rend(); ++it)
      if (it->committed && it->step < latest_step) candidates.push_back(it->dir);
    fallback_allowed = true;
  }
  if (candidates.empty() && !cfg_.load_full_state_path.empty()) {
    candidates = {cfg_.load_full_state_path};
  } else if (candidates.empty() && !cfg_.load_parameters_path.empty()) {
    candidates = {cfg_.load_parameters_path};
    full_state = false;
  }
  RestoreResult result;
  if (candidates.empty()) return result;
  std::vector<std::string> unreadable;  // candidates that did not restore: damaged
  for (size_t c = 0; c < candidates.size(); ++c) {
    auto t0 = Clock::now();
    int64_t step = 0;
    Status st = RestoreFrom(candidates[c], full_state, &step);
    // Every rank must restore the same checkpoint: any failure sends all to the next.
    double failures = st.ok() ? 0 : 1;
    if (world_->size() > 1) ELASTRAIN_RETURN_IF_ERROR(world_->AllReduceSum(&failures, 1));
    if (failures == 0) {
      result = {step, candidates[c], full_state};
      if (chief() && fallback_allowed) ELASTRAIN_RETURN_IF_ERROR(RemoveNewerThan(step, unreadable));
      LOG_INFO("restored {} from {} (step {}) in {:.2f}s", full_state ? "the full state" : "parameters",
               candidates[c], step, SecondsSince(t0));
      if (chief())
        events_->Emit(CheckpointRestoredEvent{step, candidates[c], SecondsSince(t0), full_state});
      return result;
    }
    const std::string why = st.ok() ? fmt::format("{} of the ranks could not read it", failures) : st.message();
    if (!fallback_allowed || c + 1 == candidates.size())
      return Status::Corruption(fmt::format("cannot restore from {}: {}", candidates[c], why));
    unreadable.push_back(candidates[c]);
    LOG_WARN("checkpoint {} does not restore ({}); falling back to {}", candidates[c], why, candidates[c + 1]);
    if (chief())
      events_->Emit(CheckpointRestoreFallbackEvent{candidates[c], why, candidates[c + 1]});
  }
  return result;
}

}  // namespace elastrain
