#include "train/shard_pieces.h"

namespace elastrain {

std::vector<ckpt::PieceSpec> PiecesOf(const std::vector<OwnedRun>& runs, const ParamLayout& local,
                                      const std::vector<TensorSharding>& sharding, int tensor_rank, bool for_saving,
                                      std::vector<int64_t>* shard_offsets) {
  std::vector<ckpt::PieceSpec> out;
  for (const OwnedRun& r : runs) {
    const TensorSharding& sh = sharding[r.tensor];
    const bool replicated = sh.split == TensorSplit::kReplicated;
    if (for_saving && replicated && tensor_rank != 0) continue;  // tensor rank 0 saves it
    ckpt::PieceSpec p;
    p.tensor = local.tensors[r.tensor].name;
    p.global_shape = sh.global_shape;
    p.tp_dim = replicated ? -1 : sh.split_dim;
    if (!replicated) {
      const IndexRange slice = sh.GlobalSlice(tensor_rank);
      p.tp_begin = slice.begin;
      p.tp_end = slice.end;
    }
    p.flat_begin = r.local_begin;
    p.flat_end = r.local_begin + r.n;
    out.push_back(std::move(p));
    shard_offsets->push_back(r.shard_offset);
  }
  return out;
}

ShardContents ShardOf(const ModelConfig& global, const Mesh& mesh, MeshCoords coords, bool for_saving) {
  auto local_or = TensorLocalConfig(global, mesh.tensor());
  const ModelConfig local = local_or.ok() ? local_or.value() : global;  // the caller checked divisibility
  const ParamLayout layout = BuildParamLayout(local);
  ShardContents out;
  const std::vector<FsdpUnit> units = FsdpUnits(layout, mesh.fsdp(), coords.fsdp, &out.shard_size);
  out.pieces = PiecesOf(OwnedRunsOf(layout, units, mesh.fsdp()), layout, ShardingTable(global, mesh.tensor()),
                        coords.tensor, for_saving, &out.offsets);
  return out;
}

}  // namespace elastrain
