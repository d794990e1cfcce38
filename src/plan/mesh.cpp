#include "plan/mesh.h"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <cstdlib>

#include "common/log.h"
#include "model/flops.h"

namespace elastrain {

namespace {

[[noreturn]] void BrokenInvariant(const std::string& what) {
  LOG_ERROR("Mesh: broken precondition: {}", what);
  std::abort();
}

constexpr std::array<MeshAxis, 3> kAxes = {MeshAxis::kData, MeshAxis::kFsdp, MeshAxis::kTensor};

// a * b, saturating at INT64_MAX (axes come from user input; only the comparison with the
// world size matters once the product is that large).
int64_t SatMul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

std::string GiB(int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30)); }

}  // namespace

const char* MeshAxisName(MeshAxis a) {
  switch (a) {
    case MeshAxis::kData: return "data";
    case MeshAxis::kFsdp: return "fsdp";
    case MeshAxis::kTensor: return "tensor";
  }
  return "?";
}

const char* MeshAxisConfigKey(MeshAxis a) {
  switch (a) {
    case MeshAxis::kData: return "ici_data_parallelism";
    case MeshAxis::kFsdp: return "ici_fsdp_parallelism";
    case MeshAxis::kTensor: return "ici_tensor_parallelism";
  }
  return "?";
}

const char* MeshGroupName(MeshGroup g) {
  switch (g) {
    case MeshGroup::kTensor: return "tensor";
    case MeshGroup::kFsdp: return "fsdp";
    case MeshGroup::kData: return "data";
    case MeshGroup::kGradient: return "gradient";
  }
  return "?";
}

Mesh::Mesh(int data, int fsdp, int tensor) : data_(data), fsdp_(fsdp), tensor_(tensor) {
  if (data < 1 || fsdp < 1 || tensor < 1)
    BrokenInvariant(fmt::format("axes must be >= 1, got data={} fsdp={} tensor={}", data, fsdp, tensor));
}

int Mesh::size(MeshAxis a) const {
  return a == MeshAxis::kData ? data_ : a == MeshAxis::kFsdp ? fsdp_ : tensor_;
}

MeshCoords Mesh::Coords(int rank) const {
  if (rank < 0 || rank >= world_size()) BrokenInvariant(fmt::format("rank {} of {}", rank, world_size()));
  MeshCoords c;
  c.tensor = rank % tensor_;
  c.fsdp = (rank / tensor_) % fsdp_;
  c.data = rank / (tensor_ * fsdp_);
  return c;
}

int Mesh::Rank(const MeshCoords& c) const {
  if (c.data < 0 || c.data >= data_ || c.fsdp < 0 || c.fsdp >= fsdp_ || c.tensor < 0 || c.tensor >= tensor_)
    BrokenInvariant(fmt::format("coordinates d={} f={} t={} outside {}", c.data, c.fsdp, c.tensor, ToString()));
  return (c.data * fsdp_ + c.fsdp) * tensor_ + c.tensor;
}

std::vector<int> Mesh::Group(MeshGroup kind, int rank) const {
  const MeshCoords me = Coords(rank);
  std::vector<int> out;
  // Loop in rank order (d, f, t) over the coordinates the group varies; the others stay
  // fixed at `me`'s, so the list comes out sorted.
  const bool vary_d = kind == MeshGroup::kData || kind == MeshGroup::kGradient;
  const bool vary_f = kind == MeshGroup::kFsdp || kind == MeshGroup::kGradient;
  const bool vary_t = kind == MeshGroup::kTensor;
  for (int d = vary_d ? 0 : me.data; d < (vary_d ? data_ : me.data + 1); ++d)
    for (int f = vary_f ? 0 : me.fsdp; f < (vary_f ? fsdp_ : me.fsdp + 1); ++f)
      for (int t = vary_t ? 0 : me.tensor; t < (vary_t ? tensor_ : me.tensor + 1); ++t)
        out.push_back(Rank({d, f, t}));
  return out;
}

int Mesh::GroupRank(MeshGroup kind, int rank) const {
  const MeshCoords c = Coords(rank);
  switch (kind) {
    case MeshGroup::kTensor: return c.tensor;
    case MeshGroup::kFsdp: return c.fsdp;
    case MeshGroup::kData: return c.data;
    case MeshGroup::kGradient: return c.data * fsdp_ + c.fsdp;
  }
  return 0;
}

std::string Mesh::ToString() const {
  return fmt::format("data={} x fsdp={} x tensor={} = {} ranks (rank = (d*{} + f)*{} + t)", data_, fsdp_, tensor_,
                     world_size(), fsdp_, tensor_);
}

std::string Mesh::LayoutTable() const {
  std::string out = fmt::format("mesh: {}\n  chosen: {}\n", ToString(), origin);
  out += fmt::format("  tensor groups (ranks that share rows of the batch):\n");
  constexpr int kMaxLines = 64;  // a 1024-way data-parallel mesh need not print 1024 lines
  for (int d = 0; d < data_; ++d)
    for (int f = 0; f < fsdp_; ++f) {
      if (d * fsdp_ + f == kMaxLines) out += fmt::format("    ... ({} more)\n", batch_shards() - kMaxLines);
      if (d * fsdp_ + f >= kMaxLines) continue;
      std::string ranks;
      for (int t = 0; t < tensor_; ++t) ranks += fmt::format(" {}", Rank({d, f, t}));
      out += fmt::format("    d={} f={}: ranks{}\n", d, f, ranks);
    }
  return out;
}

Status CheckTensorDivides(const ModelConfig& m, int64_t tensor, const std::string& how) {
  const struct {
    const char* key;
    int64_t value;
  } dims[] = {
      {"base_num_query_heads", m.num_heads}, {"base_num_kv_heads", m.num_kv_heads}, {"base_mlp_dim", m.mlp_dim}};
  for (const auto& d : dims)
    if (d.value % tensor != 0)
      return Status::InvalidArgument(fmt::format(
          "{} does not divide {}={}: tensor parallelism splits whole heads and MLP rows; expected a divisor of "
          "base_num_query_heads={}, base_num_kv_heads={} and base_mlp_dim={}",
          how, d.key, d.value, m.num_heads, m.num_kv_heads, m.mlp_dim));
  return Status::OK();
}

namespace {

// The automatic rule (docs/parallelism.md): tensor = 1; data parallel when the whole
// replicated state fits a worker's budget, else FSDP over every worker.
Mesh AutoMesh(int world_size, const ModelConfig& m, const AutoMeshBudget& budget) {
  if (world_size == 1) {
    Mesh mesh(1, 1, 1);
    mesh.origin = "auto: a single worker";
    return mesh;
  }
  const MemoryEstimate e = EstimateTrainingMemory(m, budget.batch_rows, budget.seq_len, budget.remat_full);
  const double limit = kAutoMeshMemoryFraction * static_cast<double>(budget.memory_bytes_per_worker);
  const bool fits = static_cast<double>(e.total()) <= limit;
  Mesh mesh = fits ? Mesh(world_size, 1, 1) : Mesh(1, world_size, 1);
  mesh.origin = fmt::format(
      "auto (all ici_*_parallelism 0): replicated state {} (params+grads+AdamW+activations) {} {:.0f}% of {} "
      "per worker -> {}",
      GiB(e.total()), fits ? "fits" : "exceeds", 100 * kAutoMeshMemoryFraction, GiB(budget.memory_bytes_per_worker),
      fits ? "data parallel" : "FSDP");
  return mesh;
}

// The given axes (0: not given, -1: fill) checked; `*fill` is the -1 axis or -1.
Status CheckGivenAxes(const std::array<int64_t, 3>& given, int* fill) {
  *fill = -1;
  for (int i = 0; i < 3; ++i) {
    const char* key = MeshAxisConfigKey(kAxes[i]);
    if (given[i] < -1)
      return Status::InvalidArgument(fmt::format(
          "{}={}: expected a positive integer, 0 (not given) or -1 (fill with the workers left)", key, given[i]));
    if (given[i] != -1) continue;
    if (*fill >= 0)
      return Status::InvalidArgument(fmt::format("{}=-1 and {}=-1: at most one mesh axis may be -1 (fill)",
                                                 MeshAxisConfigKey(kAxes[*fill]), key));
    *fill = i;
  }
  return Status::OK();
}

// An explicit mesh: axes not given are 1, the -1 axis takes the workers left, and the
// product must be the world size.
Result<Mesh> ExplicitMesh(int world_size, const std::array<int64_t, 3>& given, int fill, const ModelConfig& m) {
  std::array<int64_t, 3> axes{};
  int64_t known = 1;
  for (int i = 0; i < 3; ++i) {
    axes[i] = given[i] == 0 ? 1 : given[i];
    if (i != fill) known = SatMul(known, axes[i]);
  }
  // "ici_data_parallelism=2 x ici_fsdp_parallelism=1 (not given) x ..."
  auto product_text = [&](bool skip_fill) {
    std::string s;
    for (int i = 0; i < 3; ++i) {
      if (skip_fill && i == fill) continue;
      s += fmt::format("{}{}={}{}", s.empty() ? "" : " x ", MeshAxisConfigKey(kAxes[i]), axes[i],
                       given[i] == 0 ? " (not given)" : "");
    }
    return s;
  };
  std::string origin = "explicit";
  for (int i = 0; i < 3; ++i)
    if (given[i] == 0) origin += fmt::format("; {} not given: 1", MeshAxisConfigKey(kAxes[i]));
  if (fill >= 0) {
    const char* key = MeshAxisConfigKey(kAxes[fill]);
    if (world_size % known != 0)
      return Status::InvalidArgument(fmt::format("{}=-1 cannot be filled: num_workers={} is not divisible by {} = {}",
                                                 key, world_size, product_text(true), known));
    axes[fill] = world_size / known;
    origin += fmt::format("; {}=-1 filled as {}", key, axes[fill]);
  }
  const int64_t product = SatMul(SatMul(axes[0], axes[1]), axes[2]);
  if (product != world_size)
    return Status::InvalidArgument(fmt::format(
        "{} = {} != num_workers={}: the mesh axes must multiply to the number of workers (hint: set one axis "
        "to -1 to fill with the workers left)",
        product_text(false), product, world_size));
  const std::string tensor_how = fill == 2 ? fmt::format("ici_tensor_parallelism=-1 (filled as {})", axes[2])
                                           : fmt::format("ici_tensor_parallelism={}", axes[2]);
  ELASTRAIN_RETURN_IF_ERROR(CheckTensorDivides(m, axes[2], tensor_how));
  Mesh mesh(static_cast<int>(axes[0]), static_cast<int>(axes[1]), static_cast<int>(axes[2]));
  mesh.origin = origin;
  return mesh;
}

}  // namespace

Result<Mesh> ResolveMesh(int world_size, int64_t ici_data, int64_t ici_fsdp, int64_t ici_tensor,
                         const ModelConfig& m, const AutoMeshBudget& budget) {
  if (world_size < 1)
    return Status::InvalidArgument(fmt::format("num_workers={}: expected a positive integer", world_size));
  const std::array<int64_t, 3> given = {ici_data, ici_fsdp, ici_tensor};
  int fill = -1;  // index of the -1 axis
  ELASTRAIN_RETURN_IF_ERROR(CheckGivenAxes(given, &fill));
  if (given == std::array<int64_t, 3>{0, 0, 0}) return AutoMesh(world_size, m, budget);
  return ExplicitMesh(world_size, given, fill, m);
}

}  // namespace elastrain
