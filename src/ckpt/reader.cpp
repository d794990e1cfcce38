// Reading pieces back (any slice, from any mesh) and verifying a whole checkpoint.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <xxhash.h>

#include "ckpt/checkpoint.h"
#include "ckpt/direct_io.h"
#include "ckpt/safetensors.h"
#include "common/checked_math.h"
#include "common/files.h"
#include "common/safe_path.h"

namespace elastrain::ckpt {

namespace {

// Open files of one read, closed together; a tensor's pieces usually share few files.
class FileCache {
 public:
  ~FileCache() {
    for (auto& [path, fd] : fds_) ::close(fd);
  }
  Result<int> Open(const std::string& path, const std::string& tensor) {
    auto it = fds_.find(path);
    if (it != fds_.end()) return it->second;
    auto opened = OpenFile(path, O_RDONLY);  // not through a link (common/safe_path.h)
    if (!opened.ok())
      return Status::NotFound(fmt::format("cannot open shard file for tensor '{}': {}", tensor,
                                          opened.status().message()));
    const int fd = opened->release();
    TryEnableDirectIo(fd);  // large reads that skip the page cache's copy, where allowed
    fds_[path] = fd;
    return fd;
  }

 private:
  std::map<std::string, int> fds_;
};

// Reads piece `p` into out[0, p.spec.size()), its checksum computed block by block as
// the data arrives (one pass), and verified.
Status ReadVerifiedInto(FileCache& files, const std::string& dir, const PieceRecord& p, float* out) {
  const std::string path = dir + "/" + p.file;
  ELASTRAIN_ASSIGN_OR_RETURN(int fd, files.Open(path, p.spec.tensor));
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> hash(XXH3_createState(), &XXH3_freeState);
  if (hash == nullptr) return Status::Internal(fmt::format("{}: cannot allocate a hash state", path));
  XXH3_64bits_reset_withSeed(hash.get(), 0);  // Hash64's seed
  Status st = ReadRangeInto(fd, p.data_offset, p.spec.size() * kF32Bytes, reinterpret_cast<char*>(out), path,
                            [&](const char* data, int64_t len) { XXH3_64bits_update(hash.get(), data, len); });
  if (!st.ok())
    return Status(st.code() == StatusCode::kCorruption
                      ? Status::Corruption(fmt::format("{} (tensor '{}', key '{}')", st.message(), p.spec.tensor, p.key))
                      : st);
  const uint64_t sum = XXH3_64bits_digest(hash.get());
  if (sum != p.checksum)
    return Status::Corruption(fmt::format("{}: tensor '{}' (key '{}', flat [{}, {})): checksum mismatch: recorded "
                                          "xxh3 {}, data has {}",
                                          path, p.spec.tensor, p.key, p.spec.flat_begin, p.spec.flat_end,
                                          HexU64(p.checksum), HexU64(sum)));
  return Status::OK();
}

Status ReadVerified(FileCache& files, const std::string& dir, const PieceRecord& p, std::vector<float>* out) {
  out->resize(static_cast<size_t>(p.spec.size()));
  return ReadVerifiedInto(files, dir, p, out->data());
}

// [first, last] global indices of a non-empty piece: a cheap overlap test before runs.
std::pair<int64_t, int64_t> GlobalBounds(const PieceSpec& p) {
  return {GlobalIndex(p, p.flat_begin), GlobalIndex(p, p.flat_end - 1)};
}

// True when the union of runs (by `begin`, `n`) covers [0, total).
template <typename T, typename Begin>
bool Covers(std::vector<T> runs, int64_t total, Begin begin) {
  std::sort(runs.begin(), runs.end(), [&](const T& a, const T& b) { return begin(a) < begin(b); });
  int64_t reached = 0;
  for (const T& r : runs) {
    if (begin(r) > reached) return false;
    reached = std::max(reached, begin(r) + r.n);
  }
  return reached >= total;
}

}  // namespace

Result<std::vector<float>> ReadPiece(const std::string& dir, const PieceRecord& piece) {
  FileCache files;
  std::vector<float> out;
  ELASTRAIN_RETURN_IF_ERROR(ReadVerified(files, dir, piece, &out));
  return out;
}

Status ReadTensorSlice(const Manifest& m, const std::string& dir, StateKind kind, const PieceSpec& want_in, float* out) {
  const TensorRecord* t = m.Find(want_in.tensor);
  if (t == nullptr)
    return Status::NotFound(fmt::format("{}: checkpoint has no tensor '{}'", dir, want_in.tensor));
  PieceSpec want = want_in;
  if (want.global_shape.empty() && !t->global_shape.empty()) want.global_shape = t->global_shape;
  if (want.global_shape != t->global_shape)
    return Status::InvalidArgument(fmt::format("{}: tensor '{}' has shape {} in the checkpoint, requested {}", dir,
                                               t->name, ShapeString(t->global_shape),
                                               ShapeString(want.global_shape)));
  ELASTRAIN_RETURN_IF_ERROR(ValidatePiece(want));
  if (want.size() == 0) return Status::OK();
  const std::vector<PieceRecord>& pieces = t->Pieces(kind);
  if (pieces.empty())
    return Status::NotFound(fmt::format("{}: tensor '{}' has no {} pieces", dir, t->name, KindName(kind)));
  const std::vector<GlobalRun> want_runs = GlobalRuns(want);
  const auto [want_lo, want_hi] = GlobalBounds(want);
  std::vector<RunCopy> done;  // what has been filled, to find holes
  FileCache files;
  std::vector<float> buf;
  for (const PieceRecord& p : pieces) {
    if (p.spec.size() == 0) continue;
    const auto [lo, hi] = GlobalBounds(p.spec);
    if (hi < want_lo || lo > want_hi) continue;
    const std::vector<RunCopy> copies = IntersectRuns(GlobalRuns(p.spec), p.spec.flat_begin, want_runs, want.flat_begin);
    if (copies.empty()) continue;
    if (copies.size() == 1 && copies[0].src == 0 && copies[0].n == p.spec.size()) {
      // The whole piece lands in one run of the request (the same mesh, or a coarser
      // one): straight into place, no copy.
      ELASTRAIN_RETURN_IF_ERROR(ReadVerifiedInto(files, dir, p, out + copies[0].dst));
    } else {
      ELASTRAIN_RETURN_IF_ERROR(ReadVerified(files, dir, p, &buf));
      for (const RunCopy& c : copies) std::memcpy(out + c.dst, buf.data() + c.src, static_cast<size_t>(c.n) * 4);
    }
    done.insert(done.end(), copies.begin(), copies.end());
  }
  if (!Covers(done, want.size(), [](const RunCopy& c) { return c.dst; }))
    return Status::Corruption(fmt::format("{}: the {} pieces of tensor '{}' do not cover the requested slice "
                                          "(tp_dim {}, tp [{}, {}), flat [{}, {}))",
                                          dir, KindName(kind), t->name, want.tp_dim, want.tp_begin, want.tp_end,
                                          want.flat_begin, want.flat_end));
  return Status::OK();
}

Result<int64_t> GlobalTensorElements(const Manifest& m, const std::string& dir, StateKind kind,
                                     const std::string& tensor) {
  const TensorRecord* t = m.Find(tensor);
  if (t == nullptr) return Status::NotFound(fmt::format("{}: checkpoint has no tensor '{}'", dir, tensor));
  Result<int64_t> numel = CheckedNumElements(t->global_shape, fmt::format("{}: tensor '{}' shape", dir, tensor));
  if (!numel.ok()) return CorruptionOf(numel.status());
  if (*numel == 0) return int64_t{0};
  if (t->Pieces(kind).empty())
    return Status::NotFound(fmt::format("{}: tensor '{}' has no {} pieces", dir, t->name, KindName(kind)));
  // The pieces of one kind are disjoint bytes of their files, so the tensor cannot be
  // larger than those files really are: checked before a reader allocates it.
  std::set<std::string> seen;
  int64_t file_bytes = 0;
  for (const PieceRecord& p : t->Pieces(kind)) {
    if (!seen.insert(p.file).second) continue;
    const std::string path = dir + "/" + p.file;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
      return Status::NotFound(fmt::format("{}: cannot stat shard file for tensor '{}' ({})", path, t->name,
                                          std::strerror(errno)));
    if (__builtin_add_overflow(file_bytes, static_cast<int64_t>(st.st_size), &file_bytes)) file_bytes = INT64_MAX;
  }
  if (*numel > file_bytes / kF32Bytes)
    return Status::Corruption(fmt::format("{}: tensor '{}' has shape {} ({} F32 bytes), but the files of its {} pieces "
                                          "hold only {} bytes (a damaged manifest)",
                                          dir, t->name, ShapeString(t->global_shape), *numel * kF32Bytes,
                                          KindName(kind), file_bytes));
  return *numel;
}

Result<std::vector<float>> ReadGlobalTensor(const Manifest& m, const std::string& dir, StateKind kind,
                                            const std::string& tensor) {
  ELASTRAIN_ASSIGN_OR_RETURN(const int64_t numel, GlobalTensorElements(m, dir, kind, tensor));
  const TensorRecord* t = m.Find(tensor);
  PieceSpec want{tensor, t->global_shape, -1, 0, 0, 0, numel};
  std::vector<float> out(static_cast<size_t>(want.size()));
  ELASTRAIN_RETURN_IF_ERROR(ReadTensorSlice(m, dir, kind, want, out.data()));
  return out;
}

std::vector<std::string> FindProblems(const std::string& dir) {
  std::vector<std::string> problems;
  if (!IsDirectory(dir)) return {fmt::format("{}: no such checkpoint directory", dir)};
  Result<Manifest> mr = ReadManifest(dir);
  if (!mr.ok()) return {mr.status().message()};
  const Manifest& m = *mr;
  if (!FileExists(dir + "/" + kCommittedFile))
    problems.push_back(fmt::format("{}/{}: missing: the checkpoint was never committed", dir, kCommittedFile));
  std::map<std::string, SafetensorsHeader> headers;  // the files that are sound so far
  for (const FileRecord& f : m.files) {
    const std::string path = dir + "/" + f.name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      problems.push_back(fmt::format("{}: missing ({} shard listed in the manifest)", path, KindName(f.kind)));
      continue;
    }
    if (st.st_size != f.bytes) {
      problems.push_back(fmt::format("{}: {} bytes, the manifest records {} (truncated or overwritten)", path,
                                     static_cast<int64_t>(st.st_size), f.bytes));
      continue;
    }
    Result<SafetensorsHeader> h = ReadSafetensorsHeader(path);
    if (!h.ok()) problems.push_back(h.status().message());
    else headers[f.name] = std::move(*h);
  }
  FileCache files;
  std::vector<float> buf;
  for (StateKind k : kAllKinds) {
    const bool kind_present =
        std::any_of(m.tensors.begin(), m.tensors.end(), [&](const TensorRecord& t) { return !t.Pieces(k).empty(); });
    if (!kind_present && k != StateKind::kParams) continue;
    for (const TensorRecord& t : m.tensors) {
      std::vector<GlobalRun> covered;
      const size_t problems_before = problems.size();
      for (const PieceRecord& p : t.Pieces(k)) {
        const std::string path = dir + "/" + p.file;
        auto h = headers.find(p.file);
        if (h == headers.end()) continue;  // the file's problem is already listed
        const SafetensorsEntry* e = h->second.Find(p.key);
        if (e == nullptr) {
          problems.push_back(fmt::format("{}: tensor '{}': key '{}' missing from the file", path, t.name, p.key));
          continue;
        }
        if (e->dtype != "F32" || e->shape != std::vector<int64_t>{p.spec.size()} || e->end - e->begin != p.spec.size() * 4 ||
            h->second.data_start + e->begin != p.data_offset) {
          problems.push_back(fmt::format("{}: tensor '{}': key '{}' is {} {} at byte {}, the manifest expects F32 [{}] "
                                         "at byte {}",
                                         path, t.name, p.key, e->dtype, ShapeString(e->shape),
                                         h->second.data_start + e->begin, p.spec.size(), p.data_offset));
          continue;
        }
        Status st = ReadVerified(files, dir, p, &buf);
        if (!st.ok()) {
          problems.push_back(st.message());
          continue;
        }
        for (const GlobalRun& r : GlobalRuns(p.spec)) covered.push_back(r);
      }
      if (problems.size() == problems_before &&
          !Covers(covered, NumElements(t.global_shape), [](const GlobalRun& r) { return r.global; }))
        problems.push_back(fmt::format("{}: tensor '{}': its {} pieces do not cover all {} elements", dir, t.name,
                                       KindName(k), NumElements(t.global_shape)));
    }
  }
  return problems;
}

Status VerifyCheckpoint(const std::string& dir) {
  const std::vector<std::string> problems = FindProblems(dir);
  if (problems.empty()) return Status::OK();
  std::string msg = problems[0];
  if (problems.size() > 1) msg += fmt::format(" (and {} more problems)", problems.size() - 1);
  return IsDirectory(dir) ? Status::Corruption(msg) : Status::NotFound(msg);
}

}  // namespace elastrain::ckpt
