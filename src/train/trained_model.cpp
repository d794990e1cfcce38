#include "train/trained_model.h"

#include <fmt/format.h>

#include "ckpt/checkpoint.h"
#include "common/files.h"
#include "common/log.h"
#include "model/layout.h"

namespace elastrain {

namespace {

Result<std::string> CheckpointDirOf(const TrainedModelSource& src) {
  if (src.run_dir.empty() == src.checkpoint_dir.empty())
    return Status::InvalidArgument("give exactly one of a run directory (--run-dir) and a checkpoint (--checkpoint)");
  if (!src.checkpoint_dir.empty()) {
    if (!FileExists(src.checkpoint_dir))
      return Status::NotFound(fmt::format("--checkpoint {}: no such directory", src.checkpoint_dir));
    if (!FileExists(src.checkpoint_dir + "/" + ckpt::kCommittedFile))
      return Status::FailedPrecondition(fmt::format(
          "--checkpoint {}: not a committed checkpoint (no {} file: a partial save, or not a step_N directory)",
          src.checkpoint_dir, ckpt::kCommittedFile));
    return src.checkpoint_dir;
  }
  if (!FileExists(src.run_dir)) return Status::NotFound(fmt::format("--run-dir {}: no such directory", src.run_dir));
  auto latest = ckpt::LatestCommitted(src.run_dir);
  if (!latest.ok())
    return Status::NotFound(fmt::format("--run-dir {}: no committed checkpoint ({}); train with "
                                        "enable_checkpointing=true, or give --checkpoint", src.run_dir,
                                        latest.status().message()));
  return *latest;
}

}  // namespace

Result<TrainedModel> LoadTrainedModel(const TrainedModelSource& src) {
  TrainedModel out;
  ELASTRAIN_ASSIGN_OR_RETURN(out.checkpoint_dir, CheckpointDirOf(src));
  const std::string& dir = out.checkpoint_dir;
  ELASTRAIN_ASSIGN_OR_RETURN(ckpt::Manifest m, ckpt::ReadManifest(dir));
  out.step = m.step;
  if (src.config_path.empty() && m.config_yaml.empty())
    return Status::InvalidArgument(fmt::format("{}: the manifest carries no config; give the model's config with "
                                               "--config FILE", dir));
  std::vector<std::string> ignored;
  ELASTRAIN_ASSIGN_OR_RETURN(
      out.config, !src.config_path.empty()
                      ? LoadConfig(src.config_path, src.overrides, &ignored)
                      : LoadConfigText(m.config_yaml, dir + "/" + ckpt::kManifestFile + " (config_yaml)",
                                       src.overrides, &ignored));
  if (!ignored.empty()) LOG_WARN("{}", IgnoredKeysSummary(ignored));
  // What a rank of a 1x1x1 mesh owns: every tensor whole.
  const ParamLayout layout = BuildParamLayout(out.config.model);
  out.params.assign(layout.total, 0.0f);
  for (const ParamTensor& t : layout.tensors) {
    const ckpt::TensorRecord* rec = m.Find(t.name);
    if (!rec || rec->global_shape != t.shape)
      return Status::InvalidArgument(fmt::format(
          "{}: tensor {} is {} in the checkpoint but the config's model ({}) expects {}; the checkpoint is of "
          "another model", dir, t.name, rec ? ckpt::ShapeString(rec->global_shape) : "missing",
          out.config.model.name, ckpt::ShapeString(t.shape)));
    ckpt::PieceSpec want;
    want.tensor = t.name;
    want.global_shape = t.shape;
    want.flat_begin = 0;
    want.flat_end = t.size;
    ELASTRAIN_RETURN_IF_ERROR(ckpt::ReadTensorSlice(m, dir, ckpt::StateKind::kParams, want, out.params.data() + t.offset));
  }
  return out;
}

}  // namespace elastrain
