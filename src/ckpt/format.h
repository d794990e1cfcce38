// The checkpoint data model (docs/checkpoint-format.md): pieces of global tensors, the
// records a shard file returns, and the manifest that ties a checkpoint together.
//
// A piece is a contiguous flat range of one tensor's tensor-parallel LOCAL view: the
// global tensor cut to [tp_begin, tp_end) along tp_dim (nothing cut when tp_dim = -1),
// read row-major. That is exactly what an FSDP rank owns of a tensor in its tensor-local
// flat buffer (plan/sharding.h, train/train_state.h), so a rank describes its state
// without copying, and a reader with any other mesh maps both sides to global indices.
// Plain data; no I/O here.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/choice.h"
#include "common/status.h"

namespace elastrain::ckpt {

inline constexpr char kFormatName[] = "elastrain-checkpoint";
inline constexpr int kFormatVersion = 1;
inline constexpr char kManifestFile[] = "manifest.json";
inline constexpr char kCommittedFile[] = "COMMITTED";
inline constexpr char kLatestFile[] = "LATEST";
inline constexpr char kCheckpointsDir[] = "checkpoints";

// What a buffer of floats holds. AdamW moments live in files of their own so that a
// params-only restore (or `checkpoint export`) never reads them.
enum class StateKind { kParams, kAdamM, kAdamV };
inline constexpr StateKind kAllKinds[] = {StateKind::kParams, StateKind::kAdamM, StateKind::kAdamV};
// The words of the kinds, in manifests and shard file names.
inline constexpr std::array<Choice<StateKind>, 3> kStateKindChoices = {{
    {"params", StateKind::kParams},
    {"adam_m", StateKind::kAdamM},
    {"adam_v", StateKind::kAdamV},
}};
const char* KindName(StateKind k);  // "params" / "adam_m" / "adam_v"
// InvalidArgument "state kind 'x': expected one of params, adam_m, adam_v" for another word.
Result<StateKind> KindFromName(const std::string& name);

struct PieceSpec {
  std::string tensor;                 // global name, e.g. "layers.0.attn.wq"
  std::vector<int64_t> global_shape;  // row-major
  int tp_dim = -1;                    // -1: replicated (tp_begin/tp_end ignored), else 0..rank-1
  int64_t tp_begin = 0, tp_end = 0;   // slice of the global tensor along tp_dim
  int64_t flat_begin = 0, flat_end = 0;  // within the local view, row-major
  int64_t size() const { return flat_end - flat_begin; }
};

// "[4, 8]": a shape for messages and listings.
std::string ShapeString(const std::vector<int64_t>& shape);
// Product of the shape (1 for a scalar). Only for shapes already checked (a valid
// piece, a manifest that ManifestFromJson accepted): it does not check for overflow.
int64_t NumElements(const std::vector<int64_t>& shape);
// Bytes of one element of every tensor checkpoints hold (F32).
inline constexpr int64_t kF32Bytes = 4;
// The element count of a shape from a file or a caller: InvalidArgument naming `what`
// when a dimension is negative or when the count, or its F32 bytes, overflow int64.
Result<int64_t> CheckedNumElements(const std::vector<int64_t>& shape, const std::string& what);
// global_shape with tp_dim cut to [tp_begin, tp_end).
std::vector<int64_t> LocalViewShape(const PieceSpec& p);
// InvalidArgument unless the dims, the tp slice and the flat range fit the shape, and
// the shape's element count and F32 bytes fit int64 (so every index and byte offset
// derived from a valid piece is overflow-free).
Status ValidatePiece(const PieceSpec& p);

// A run of consecutive elements: local view index `local` .. local+n-1 are global flat
// indices `global` .. global+n-1.
struct GlobalRun {
  int64_t local = 0, global = 0, n = 0;
};
// The piece's flat range as runs of consecutive global indices, in increasing order of
// both (the map from local to global index is strictly increasing). A whole-tensor or
// dim-0 slice is one run; a dim-1 slice is one run per row. `p` must be valid.
std::vector<GlobalRun> GlobalRuns(const PieceSpec& p);
// Global flat index of local view element `i` of `p` (the same map, one element).
int64_t GlobalIndex(const PieceSpec& p, int64_t local_index);

// n elements of one tensor that two pieces share: index `src` of the source piece's
// data, `dst` of the destination's (both relative to their flat_begin).
struct RunCopy {
  int64_t src = 0, dst = 0, n = 0;
};
// Where the elements of `src` (GlobalRuns of a piece starting at src_base) land in `dst`
// (GlobalRuns of a piece starting at dst_base): both sorted by global index.
std::vector<RunCopy> IntersectRuns(const std::vector<GlobalRun>& src, int64_t src_base,
                                   const std::vector<GlobalRun>& dst, int64_t dst_base);

// A piece as written: where its bytes are and their checksum.
struct PieceRecord {
  PieceSpec spec;
  std::string file;          // file name inside the checkpoint directory
  std::string key;           // tensor key inside that safetensors file
  int64_t data_offset = 0;   // absolute byte offset of the piece's data in the file
  uint64_t checksum = 0;     // XXH3-64 (seed 0) of the piece's raw little-endian bytes
};

// What WriteShardFile returns: everything the manifest needs about one file.
struct ShardFileInfo {
  std::string file;   // file name (no directory)
  StateKind kind = StateKind::kParams;
  int64_t bytes = 0;  // the whole file's size
  std::vector<PieceRecord> pieces;
};
// For the trainer to move a rank's ShardFileInfo to the manifest writer (one JSON text).
std::string ShardFileInfoToJson(const std::vector<ShardFileInfo>& files);
Result<std::vector<ShardFileInfo>> ShardFileInfoFromJson(const std::string& json);

struct MeshShape {
  int data = 1, fsdp = 1, tensor = 1, world = 1;
};
struct DataState {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t step = 0;
  int64_t consumed_samples = 0;
};

struct TensorRecord {
  std::string name;
  std::string dtype = "F32";
  std::vector<int64_t> global_shape;
  std::vector<PieceRecord> pieces[3];  // indexed by StateKind
  const std::vector<PieceRecord>& Pieces(StateKind k) const { return pieces[static_cast<int>(k)]; }
};

struct FileRecord {
  std::string name;
  StateKind kind = StateKind::kParams;
  int64_t bytes = 0;
};

struct Manifest {
  int64_t step = 0;
  std::string config_yaml;  // the resolved config, verbatim
  MeshShape mesh;           // the mesh the checkpoint was saved from
  DataState data;
  std::string rng_state;    // opaque to this library (the trainer's text or JSON)
  std::vector<FileRecord> files;
  std::vector<TensorRecord> tensors;  // in the order first added

  // Adds a shard's file and pieces, creating tensor records on first sight.
  // InvalidArgument if the file name repeats or a tensor's shape disagrees.
  Status AddShard(const ShardFileInfo& shard);
  const TensorRecord* Find(const std::string& tensor) const;
};

}  // namespace elastrain::ckpt
