#include "train/peer_restore.h"

#include <map>
#include <string>

#include <fmt/format.h>

#include "plan/sharding.h"
#include "train/ram_tier_copies.h"
#include "train/shard_pieces.h"

namespace elastrain {

int64_t PeerTransfer::floats() const {
  int64_t n = 0;
  for (const ShardRunCopy& r : runs) n += r.n;
  return n;
}

Result<PeerRestorePlan> PlanPeerRestore(const ModelConfig& model, int old_fsdp, int old_tensor, const Mesh& mesh,
                                        const std::vector<int>& sources) {
  if (old_fsdp < 1 || old_tensor < 1 || sources.size() != static_cast<size_t>(old_fsdp) * old_tensor)
    return Status::InvalidArgument(fmt::format("peer restore: {} sources for an old mesh of fsdp={} tensor={}",
                                               sources.size(), old_fsdp, old_tensor));
  for (int s : sources)
    if (s < 0 || s >= mesh.world_size())
      return Status::InvalidArgument(fmt::format("peer restore: source rank {} outside [0, {})", s, mesh.world_size()));
  ELASTRAIN_RETURN_IF_ERROR(TensorLocalConfig(model, old_tensor).status());
  ELASTRAIN_RETURN_IF_ERROR(TensorLocalConfig(model, mesh.tensor()).status());
  const Mesh old_mesh(1, old_fsdp, old_tensor);
  // Each old shard's pieces (replicated tensors once, from tensor rank 0), by tensor name.
  struct OldPiece {
    int shard;
    const ckpt::PieceSpec* spec;
    int64_t offset;
  };
  std::vector<ShardContents> old(sources.size());
  std::map<std::string, std::vector<OldPiece>> by_tensor;
  PeerRestorePlan plan;
  for (int f = 0; f < old_fsdp; ++f)
    for (int t = 0; t < old_tensor; ++t) {
      const int s = ShardId(f, t, old_tensor);
      old[s] = ShardOf(model, old_mesh, MeshCoords{0, f, t}, /*for_saving=*/true);
      plan.old_shard_size = old[s].shard_size;
    }
  for (size_t s = 0; s < old.size(); ++s)
    for (size_t i = 0; i < old[s].pieces.size(); ++i)
      by_tensor[old[s].pieces[i].tensor].push_back({static_cast<int>(s), &old[s].pieces[i], old[s].offsets[i]});

  for (int r = 0; r < mesh.world_size(); ++r) {
    const ShardContents want = ShardOf(model, mesh, mesh.Coords(r), /*for_saving=*/false);
    std::map<int, PeerTransfer> per_shard;
    for (size_t j = 0; j < want.pieces.size(); ++j) {
      const ckpt::PieceSpec& w = want.pieces[j];
      if (w.size() == 0) continue;
      const std::vector<ckpt::GlobalRun> want_runs = ckpt::GlobalRuns(w);
      int64_t covered = 0;
      for (const OldPiece& o : by_tensor[w.tensor]) {
        if (o.spec->size() == 0) continue;
        for (const ckpt::RunCopy& c :
             ckpt::IntersectRuns(ckpt::GlobalRuns(*o.spec), o.spec->flat_begin, want_runs, w.flat_begin)) {
          PeerTransfer& tr = per_shard[o.shard];
          tr.runs.push_back({o.offset + c.src, want.offsets[j] + c.dst, c.n});
          covered += c.n;
        }
      }
      if (covered != w.size())
        return Status::Internal(fmt::format("peer restore: the old shards cover {} of the {} elements rank {} needs "
                                            "of tensor '{}'", covered, w.size(), r, w.tensor));
    }
    for (auto& [shard, tr] : per_shard) {
      tr.shard = shard;
      tr.from = sources[shard];
      tr.to = r;
      plan.transfers.push_back(std::move(tr));
    }
  }
  return plan;
}

}  // namespace elastrain
