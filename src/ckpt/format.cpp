#include "ckpt/format.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/checked_math.h"

namespace elastrain::ckpt {

const char* KindName(StateKind k) { return ChoiceWord(kStateKindChoices, k).data(); }

Result<StateKind> KindFromName(const std::string& name) {
  if (const std::optional<StateKind> k = ParseChoice(kStateKindChoices, name)) return *k;
  return Status::InvalidArgument(ChoiceRefusal(kStateKindChoices, "state kind '" + name + "'"));
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<int64_t> CheckedNumElements(const std::vector<int64_t>& shape, const std::string& what) {
  ELASTRAIN_ASSIGN_OR_RETURN(const int64_t n, CheckedProduct(shape, what + " element count"));
  ELASTRAIN_RETURN_IF_ERROR(CheckedMul(n, kF32Bytes, what + " bytes").status());
  return n;
}

std::vector<int64_t> LocalViewShape(const PieceSpec& p) {
  std::vector<int64_t> s = p.global_shape;
  if (p.tp_dim >= 0 && p.tp_dim < static_cast<int>(s.size())) s[p.tp_dim] = p.tp_end - p.tp_begin;
  return s;
}

Status ValidatePiece(const PieceSpec& p) {
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(fmt::format("piece of tensor '{}' (shape {}, tp_dim {}, tp [{}, {}), flat [{}, {})): {}",
                                               p.tensor, ShapeString(p.global_shape), p.tp_dim, p.tp_begin,
                                               p.tp_end, p.flat_begin, p.flat_end, what));
  };
  if (p.tensor.empty()) return bad("empty tensor name");
  for (int64_t d : p.global_shape)
    if (d < 0) return bad("negative dimension");
  if (Result<int64_t> n = CheckedNumElements(p.global_shape, "shape"); !n.ok()) return bad(n.status().message());
  const int rank = static_cast<int>(p.global_shape.size());
  if (p.tp_dim < -1 || p.tp_dim >= rank) return bad(fmt::format("tp_dim must be -1 or in [0, {})", rank));
  if (p.tp_dim >= 0 && !(0 <= p.tp_begin && p.tp_begin <= p.tp_end && p.tp_end <= p.global_shape[p.tp_dim]))
    return bad(fmt::format("tp slice must lie within [0, {}]", p.global_shape[p.tp_dim]));
  const int64_t local = NumElements(LocalViewShape(p));
  if (!(0 <= p.flat_begin && p.flat_begin <= p.flat_end && p.flat_end <= local))
    return bad(fmt::format("flat range must lie within the local view's {} elements", local));
  return Status::OK();
}

namespace {
// The local view as (outer, D, dl, inner): global index of local (o, j, k) is
// (o*D + tp_begin + j)*inner + k, local index (o*dl + j)*inner + k.
struct ViewGeometry {
  int64_t outer = 1, D = 1, dl = 1, inner = 1, tp_begin = 0;
};
ViewGeometry Geometry(const PieceSpec& p) {
  ViewGeometry g;
  if (p.tp_dim < 0) return g;  // identity map; outer/dl/inner unused
  for (int i = 0; i < p.tp_dim; ++i) g.outer *= p.global_shape[i];
  g.D = p.global_shape[p.tp_dim];
  g.dl = p.tp_end - p.tp_begin;
  for (size_t i = p.tp_dim + 1; i < p.global_shape.size(); ++i) g.inner *= p.global_shape[i];
  g.tp_begin = p.tp_begin;
  return g;
}
}  // namespace

std::vector<GlobalRun> GlobalRuns(const PieceSpec& p) {
  std::vector<GlobalRun> runs;
  if (p.flat_begin >= p.flat_end) return runs;
  if (p.tp_dim < 0) return {GlobalRun{p.flat_begin, p.flat_begin, p.size()}};
  const ViewGeometry g = Geometry(p);
  const int64_t block = g.dl * g.inner;  // local elements per outer index, contiguous in global too
  for (int64_t o = p.flat_begin / block; o * block < p.flat_end; ++o) {
    const int64_t lb = std::max(p.flat_begin, o * block), le = std::min(p.flat_end, (o + 1) * block);
    const int64_t gb = (o * g.D + g.tp_begin) * g.inner + (lb - o * block);
    // Merge with the previous run when the slice is the whole dimension (or dim 0).
    if (!runs.empty() && runs.back().global + runs.back().n == gb) {
      runs.back().n += le - lb;
    } else {
      runs.push_back({lb, gb, le - lb});
    }
  }
  return runs;
}

int64_t GlobalIndex(const PieceSpec& p, int64_t i) {
  if (p.tp_dim < 0) return i;
  const ViewGeometry g = Geometry(p);
  const int64_t block = g.dl * g.inner, o = i / block, r = i % block;
  return (o * g.D + g.tp_begin) * g.inner + r;
}

Status Manifest::AddShard(const ShardFileInfo& shard) {
  for (const FileRecord& f : files)
    if (f.name == shard.file) return Status::InvalidArgument(fmt::format("manifest: file '{}' added twice", shard.file));
  files.push_back({shard.file, shard.kind, shard.bytes});
  for (const PieceRecord& r : shard.pieces) {
    ELASTRAIN_RETURN_IF_ERROR(ValidatePiece(r.spec));
    TensorRecord* t = nullptr;
    for (TensorRecord& x : tensors)
      if (x.name == r.spec.tensor) t = &x;
    if (t == nullptr) {
      tensors.push_back({});
      t = &tensors.back();
      t->name = r.spec.tensor;
      t->global_shape = r.spec.global_shape;
    } else if (t->global_shape != r.spec.global_shape) {
      return Status::InvalidArgument(fmt::format("manifest: tensor '{}' has shape {} in '{}' but {} elsewhere",
                                                 t->name, ShapeString(r.spec.global_shape), shard.file,
                                                 ShapeString(t->global_shape)));
    }
    t->pieces[static_cast<int>(shard.kind)].push_back(r);
  }
  return Status::OK();
}

const TensorRecord* Manifest::Find(const std::string& tensor) const {
  for (const TensorRecord& t : tensors)
    if (t.name == tensor) return &t;
  return nullptr;
}

std::vector<RunCopy> IntersectRuns(const std::vector<GlobalRun>& src, int64_t src_base,
                                   const std::vector<GlobalRun>& dst, int64_t dst_base) {
  std::vector<RunCopy> out;
  size_t i = 0, j = 0;
  while (i < src.size() && j < dst.size()) {
    const GlobalRun &a = src[i], &b = dst[j];
    const int64_t lo = std::max(a.global, b.global), hi = std::min(a.global + a.n, b.global + b.n);
    if (lo < hi) out.push_back({a.local + (lo - a.global) - src_base, b.local + (lo - b.global) - dst_base, hi - lo});
    if (a.global + a.n <= b.global + b.n) ++i; else ++j;
  }
  return out;
}

}  // namespace elastrain::ckpt
