// Writing shard files, committing, the LATEST pointer, listing and pruning.
#include "ckpt/checkpoint.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "ckpt/safetensors.h"
#include "common/fault.h"
#include "common/files.h"
#include "common/log.h"

namespace elastrain::ckpt {

namespace fs = std::filesystem;

namespace {

int64_t ParseStepName(const std::string& name) {
  if (name.size() < 6 || name.compare(0, 5, "step_") != 0) return -1;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || step > (INT64_MAX - 9) / 10) return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

std::string StepName(int64_t step) { return fmt::format("step_{:08d}", step); }
std::string CheckpointsRoot(const std::string& run_dir) { return run_dir + "/" + kCheckpointsDir; }
bool IsCommitted(const std::string& dir) { return FileExists(dir + "/" + kCommittedFile); }

// LATEST's directory name, or "" when it is missing or does not name a step directory.
std::string ReadLatestName(const std::string& run_dir) {
  Result<std::string> text = ReadFile(CheckpointsRoot(run_dir) + "/" + kLatestFile);
  if (!text.ok()) return "";
  std::string name = *text;
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ' || name.back() == '\r')) name.pop_back();
  return ParseStepName(name) >= 0 ? name : "";
}

int64_t DirBytes(const std::string& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code ec2;
    if (it->is_regular_file(ec2)) total += static_cast<int64_t>(it->file_size(ec2));
  }
  return total;
}

Status RemoveDir(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) return Status::IOError(fmt::format("{}: cannot remove ({})", dir, ec.message()));
  return Status::OK();
}

}  // namespace

int64_t StepOfDirName(const std::string& name) { return ParseStepName(name); }

std::string CheckpointDir(const std::string& run_dir, int64_t step) {
  return CheckpointsRoot(run_dir) + "/" + StepName(step);
}

std::string ShardFileName(StateKind kind, int rank) { return fmt::format("{}-{:05d}.safetensors", KindName(kind), rank); }

Result<ShardFileInfo> WriteShardFile(const std::string& path, StateKind kind, const std::vector<PieceSpec>& pieces,
                                     const std::vector<const float*>& data) {
  if (pieces.size() != data.size())
    return Status::InvalidArgument(fmt::format("{}: {} pieces but {} data pointers", path, pieces.size(), data.size()));
  return WriteShardFileFrom(path, kind, pieces, [&](size_t i) -> Result<const float*> { return data[i]; });
}

Result<ShardFileInfo> WriteShardFileFrom(const std::string& path, StateKind kind, const std::vector<PieceSpec>& pieces,
                                         const std::function<Result<const float*>(size_t)>& fill) {
  std::vector<SafetensorsWriter::Entry> entries;
  for (const PieceSpec& p : pieces) {
    ELASTRAIN_RETURN_IF_ERROR(ValidatePiece(p));
    entries.push_back({fmt::format("{}@{}", p.tensor, p.flat_begin), {p.size()}});
  }
  const fs::path fp(path);
  if (fp.has_parent_path()) ELASTRAIN_RETURN_IF_ERROR(MakeDirs(fp.parent_path().string()));
  ELASTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<SafetensorsWriter> w,
      SafetensorsWriter::Create(path, entries, {{"format", kFormatName}, {"kind", KindName(kind)}}));
  ShardFileInfo info;
  info.file = fp.filename().string();
  info.kind = kind;
  for (size_t i = 0; i < pieces.size(); ++i) {
    ELASTRAIN_ASSIGN_OR_RETURN(const float* data, fill(i));
    ELASTRAIN_ASSIGN_OR_RETURN(uint64_t sum, w->Append(data, pieces[i].size()));
    info.pieces.push_back({pieces[i], info.file, entries[i].key, w->DataOffset(i), sum});
  }
  ELASTRAIN_ASSIGN_OR_RETURN(info.bytes, w->Finish());
  fault::CrashIfFires(fault::Point::kCrashAfterShard, {.path = path});
  return info;
}

Status Commit(const std::string& dir) {
  fault::CrashIfFires(fault::Point::kCrashBeforeCommit, {.path = dir});
  ELASTRAIN_ASSIGN_OR_RETURN(Manifest m, ReadManifest(dir));
  for (const FileRecord& f : m.files) {
    const std::string path = dir + "/" + f.name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
      return Status::FailedPrecondition(fmt::format("{}: cannot commit: shard file {} is missing", dir, f.name));
    if (st.st_size != f.bytes)
      return Status::FailedPrecondition(fmt::format("{}: cannot commit: {} has {} bytes, the manifest records {}", dir,
                                                    f.name, static_cast<int64_t>(st.st_size), f.bytes));
  }
  return WriteFileAtomic(dir + "/" + kCommittedFile, fmt::format("{}\n", StepName(m.step)));
}

Status SetLatest(const std::string& run_dir, int64_t step) {
  // The step directory, so that a test can target the save of one step.
  fault::CrashIfFires(fault::Point::kCrashBeforeLatest, {.path = CheckpointDir(run_dir, step)});
  const std::string dir = CheckpointDir(run_dir, step);
  if (!IsCommitted(dir))
    return Status::FailedPrecondition(fmt::format("{}: not committed; LATEST may only name a committed checkpoint", dir));
  return WriteFileAtomic(CheckpointsRoot(run_dir) + "/" + kLatestFile, StepName(step) + "\n");
}

Result<std::vector<CheckpointInfo>> ListCheckpoints(const std::string& run_dir) {
  if (!IsDirectory(run_dir)) return Status::NotFound(fmt::format("{}: no such run directory", run_dir));
  std::vector<CheckpointInfo> out;
  const std::string root = CheckpointsRoot(run_dir);
  if (!IsDirectory(root)) return out;
  const std::string latest = ReadLatestName(run_dir);
  std::error_code ec;
  for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const int64_t step = ParseStepName(name);
    std::error_code ec2;
    if (step < 0 || !it->is_directory(ec2)) continue;
    const std::string dir = it->path().string();
    out.push_back({step, dir, IsCommitted(dir), name == latest, DirBytes(dir)});
  }
  if (ec) return Status::IOError(fmt::format("{}: cannot list ({})", root, ec.message()));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return out;
}

Result<std::string> LatestCommitted(const std::string& run_dir) {
  const std::string latest = ReadLatestName(run_dir);
  if (!latest.empty()) {
    const std::string dir = CheckpointsRoot(run_dir) + "/" + latest;
    if (IsCommitted(dir) && FileExists(dir + "/" + kManifestFile)) return dir;
    LOG_WARN("checkpoint: {}/{} names {}, which is not a committed checkpoint; using the newest committed one",
             CheckpointsRoot(run_dir), kLatestFile, latest);
  } else if (FileExists(CheckpointsRoot(run_dir) + "/" + kLatestFile)) {
    LOG_WARN("checkpoint: {}/{} is unreadable; using the newest committed checkpoint", CheckpointsRoot(run_dir),
             kLatestFile);
  }
  ELASTRAIN_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> all, ListCheckpoints(run_dir));
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (it->committed && FileExists(it->dir + "/" + kManifestFile)) return it->dir;
  return Status::NotFound(fmt::format("{}: no committed checkpoint", CheckpointsRoot(run_dir)));
}

Status ApplyRetention(const std::string& run_dir, int keep, int64_t protect_step) {
  ELASTRAIN_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> all, ListCheckpoints(run_dir));
  int64_t newest_valid = -1;
  int valid_seen = 0;
  Status first_error;
  // Newest first: the first `keep` valid committed ones stay. A committed directory whose
  // manifest does not validate is reported and left alone: it neither counts as kept
  // (which would push a good checkpoint out) nor is removed (a damaged file is never a
  // reason to delete anything, itself included; an operator decides).
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const CheckpointInfo& c = *it;
    bool remove = false;
    if (c.committed) {
      Result<Manifest> m = ReadManifest(c.dir);
      if (!m.ok()) {
        LOG_WARN("checkpoint: retention skips {}: {}", c.dir, m.status().message());
        continue;
      }
      if (newest_valid < 0) newest_valid = c.step;
      ++valid_seen;
      remove = keep > 0 && valid_seen > keep && c.step != protect_step && !c.latest;
    } else {
      // A partial directory newer than every valid committed one may be a save in progress.
      remove = newest_valid >= 0 && c.step < newest_valid && c.step != protect_step && !c.latest;
    }
    if (!remove) continue;
    LOG_INFO("checkpoint: removing {} ({})", c.dir, c.committed ? "beyond the newest kept" : "stale partial save");
    // Uncommit first, so that a crash halfway through never leaves a damaged
    // directory that still claims to be a checkpoint.
    if (c.committed && std::remove((c.dir + "/" + kCommittedFile).c_str()) != 0 && first_error.ok())
      first_error = Status::IOError(fmt::format("{}: cannot remove {}", c.dir, kCommittedFile));
    Status st = RemoveDir(c.dir);
    if (!st.ok() && first_error.ok()) first_error = st;
  }
  return first_error;
}

Status RemovePartial(const std::string& dir) {
  fs::path p(dir);
  if (!p.has_filename()) p = p.parent_path();  // "step_00000010/"
  if (ParseStepName(p.filename().string()) < 0)
    return Status::InvalidArgument(fmt::format("{}: not a checkpoint directory (expected step_NNNNNNNN)", dir));
  if (IsCommitted(dir))
    return Status::FailedPrecondition(fmt::format("{}: is committed; only partial checkpoints are removed", dir));
  return RemoveDir(dir);
}

Result<std::string> QuarantineCheckpoint(const std::string& dir) {
  fs::path p(dir);
  if (!p.has_filename()) p = p.parent_path();
  if (ParseStepName(p.filename().string()) < 0)
    return Status::InvalidArgument(fmt::format("{}: not a checkpoint directory (expected step_NNNNNNNN)", dir));
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  const fs::path to = p.parent_path() / fmt::format("damaged-{}-{}", p.filename().string(), now.count());
  std::error_code ec;
  fs::rename(p, to, ec);
  if (ec) return Status::IOError(fmt::format("{}: cannot move it to {} ({})", dir, to.string(), ec.message()));
  return to.string();
}

}  // namespace elastrain::ckpt
