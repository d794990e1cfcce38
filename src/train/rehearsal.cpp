#include "train/rehearsal.h"

namespace elastrain {

namespace {
fault::Point PointOf(FailMode m) {
  switch (m) {
    case FailMode::kExit: return fault::Point::kExitAfterStep;
    case FailMode::kKill: return fault::Point::kKillAfterStep;
    case FailMode::kHang: return fault::Point::kHangAfterStep;
    case FailMode::kPreempt: return fault::Point::kPreemptAfterStep;
    case FailMode::kKillMidSnapshot: return fault::Point::kKillMidSnapshot;
  }
  return fault::Point::kExitAfterStep;
}
}  // namespace

std::vector<fault::Fault> RehearsalFaults(const TrainConfig& cfg) {
  if (cfg.fail_at_step <= 0) return {};
  fault::Fault f;
  f.point = PointOf(cfg.fail_mode);
  f.rank = cfg.fail_rank;
  f.step = cfg.fail_at_step;
  return {f};
}

void ArmRehearsal(const TrainConfig& cfg, bool armed) {
  fault::ArmFaults("fail_at_step", armed ? RehearsalFaults(cfg) : std::vector<fault::Fault>{});
}

}  // namespace elastrain
