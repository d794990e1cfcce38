// Checkpoint storage: write shard files and the manifest, commit, follow LATEST, read
// back any slice, verify, prune. The format is docs/checkpoint-format.md.
//
// The library knows nothing of processes or collectives: the trainer decides which rank
// writes which pieces, moves the ShardFileInfo of every rank to one writer (e.g. with
// ShardFileInfoToJson), and orders the steps of a save:
//   every rank: WriteShardFile(...) for its pieces           (into CheckpointDir(run, step))
//   barrier;  one rank: WriteManifest -> Commit -> SetLatest -> ApplyRetention
// A checkpoint counts only once COMMITTED exists; LATEST names the newest one to resume.
// Every function here is thread-safe (no shared state), so saves may run in a
// background thread. Nothing here exits the process, except the crash fault points.
//
// Fault points (common/fault.h, docs/faults.md), armed by ELASTRAIN_FAULT=<point>[@path=<substring>],
// the point firing only when the file or directory path involved contains <substring>:
//   crash_after_shard      SIGKILL right after a shard file is renamed into place
//   crash_before_manifest  SIGKILL on entering WriteManifest
//   crash_before_commit    SIGKILL on entering Commit
//   crash_before_latest    SIGKILL on entering SetLatest
//   fail_write             every WriteShardFile fails with IOError after writing part of
//                          its temp file (as a full disk would), leaving nothing behind
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ckpt/format.h"
#include "common/status.h"

namespace elastrain::ckpt {

// ---- Layout ------------------------------------------------------------------------
// "<run_dir>/checkpoints/step_00000120"
std::string CheckpointDir(const std::string& run_dir, int64_t step);
// 120 for "step_00000120"; -1 for any other name (so stray files are never touched).
int64_t StepOfDirName(const std::string& name);
// "params-00003.safetensors": the file of `kind` that rank `rank` writes.
std::string ShardFileName(StateKind kind, int rank);

// ---- Writing -----------------------------------------------------------------------
// Writes one safetensors file at `path` (creating its directory) holding data[i]
// (pieces[i].size() floats) under key "<tensor>@<flat_begin>" as a 1-D F32 tensor:
// `path.tmp` (in large aligned blocks, direct I/O where the file system takes it,
// each piece's checksum computed as it is copied into the block), fdatasync, rename,
// fsync of the directory. Several may run in parallel (one file each). Keys must be unique (a tensor's
// pieces in one file must not start at the same flat index). On any error (ENOSPC
// included) the temp file is removed and the IOError names the file.
Result<ShardFileInfo> WriteShardFile(const std::string& path, StateKind kind, const std::vector<PieceSpec>& pieces,
                                     const std::vector<const float*>& data);
// The same with piece i's data (pieces[i].size() floats) from fill(i), asked for just
// before it is written and used only until the next call: one piece in memory at a time
// (an import of a model larger than memory). An error from fill removes the temp file.
Result<ShardFileInfo> WriteShardFileFrom(const std::string& path, StateKind kind, const std::vector<PieceSpec>& pieces,
                                         const std::function<Result<const float*>(size_t)>& fill);

// manifest.json in `dir`, written atomically. ReadManifest validates the format name,
// version and every field (types, ranges: step >= 0, mesh axes >= 1, shapes whose
// element count and bytes fit int64, pieces inside their files); errors name the file
// and the field. In a step_N directory the manifest's step must be N.
Status WriteManifest(const std::string& dir, const Manifest& m);
Result<Manifest> ReadManifest(const std::string& dir);
std::string ManifestToJson(const Manifest& m);
Result<Manifest> ManifestFromJson(const std::string& json, const std::string& origin);

// Checks that manifest.json parses and every file it lists exists with its recorded
// size, then writes COMMITTED (atomically, fsync'd). Call after every shard is written.
Status Commit(const std::string& dir);
// Points <run_dir>/checkpoints/LATEST at step_<step> (temp + fsync + rename + dir fsync).
// FailedPrecondition unless that checkpoint is committed.
Status SetLatest(const std::string& run_dir, int64_t step);

// ---- Finding -----------------------------------------------------------------------
struct CheckpointInfo {
  int64_t step = 0;
  std::string dir;        // full path
  bool committed = false;
  bool latest = false;    // LATEST names it
  int64_t bytes = 0;      // all files in it
};
// Every step_* directory of the run, by increasing step; empty if there is none yet.
Result<std::vector<CheckpointInfo>> ListCheckpoints(const std::string& run_dir);
// The directory to resume from: LATEST's target if it is committed, else (LATEST
// missing or broken, with a warning) the newest committed one. NotFound if none.
Result<std::string> LatestCommitted(const std::string& run_dir);

// ---- Verifying ---------------------------------------------------------------------
// Every problem of a checkpoint, one message each (empty = sound): manifest parses;
// COMMITTED present; every file exists with its recorded size and a safetensors header
// agreeing with the manifest; every piece's shape and checksum holds; every tensor of
// each kind present is covered entirely by its pieces. Messages name file and tensor.
std::vector<std::string> FindProblems(const std::string& dir);
// OK, or Corruption/NotFound with the first problem (and how many more).
Status VerifyCheckpoint(const std::string& dir);

// ---- Reading -----------------------------------------------------------------------
// One piece's values, its checksum verified (Corruption naming file and tensor).
Result<std::vector<float>> ReadPiece(const std::string& dir, const PieceRecord& piece);
// Fills out[0 .. want.size()) with the values of `want` -- any tensor-parallel slice and
// flat range of the tensor's local view, typically what a rank of the NEW mesh owns --
// from the pieces of `kind`. Reads (pread) only pieces that overlap the request, each
// verified against its checksum as it arrives; a piece that lands whole in one run of
// the request is read straight into `out`, others are copied run by run (memcpy).
// On error, `out` may hold part of the data (whatever was read before the problem).
// NotFound if the tensor or kind is absent; Corruption if the pieces leave part of
// the request uncovered or fail their checksum (naming file and tensor).
Status ReadTensorSlice(const Manifest& m, const std::string& dir, StateKind kind, const PieceSpec& want, float* out);
// The tensor's element count, once its shape fits int64 and the files holding its
// `kind` pieces are at least its F32 bytes: what a reader checks before allocating the
// whole tensor, so that a damaged shape cannot make it allocate beyond the data on disk.
// Corruption/NotFound naming the directory and tensor.
Result<int64_t> GlobalTensorElements(const Manifest& m, const std::string& dir, StateKind kind,
                                     const std::string& tensor);
// The whole tensor in its global row-major layout (checked by GlobalTensorElements first).
Result<std::vector<float>> ReadGlobalTensor(const Manifest& m, const std::string& dir, StateKind kind,
                                            const std::string& tensor);

// ---- Pruning -----------------------------------------------------------------------
// Removes committed checkpoints beyond the newest `keep` (keep <= 0: none), never
// `protect_step` nor LATEST's target, and uncommitted directories older than the newest
// committed one (stale partial saves). Newer uncommitted ones may be in progress and
// are left alone. Only committed checkpoints whose manifest validates (ReadManifest)
// count or are removed: a damaged one is logged and left in place, and never makes a
// good one look old.
Status ApplyRetention(const std::string& run_dir, int keep, int64_t protect_step);
// Removes one checkpoint directory that is NOT committed (FailedPrecondition if it is).
Status RemovePartial(const std::string& dir);
// Moves a checkpoint directory whose manifest does not validate out of the way, to
// "<checkpoints>/damaged-step_N-<unix seconds>" beside it (no longer listed, kept for a
// look), and returns the new path. For cleanup that must free step N's name (a restore
// abandoning newer steps) without deleting what it could not validate.
Result<std::string> QuarantineCheckpoint(const std::string& dir);

}  // namespace elastrain::ckpt
