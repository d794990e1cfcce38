#include "train/mfu_peak.h"

#include "kernels/gemm.h"

namespace elastrain {
namespace {
bool PeakGiven(const TrainConfig& cfg) { return cfg.hardware_peak_tflops > 0; }
}  // namespace

double RankPeakFlopsForMfu(const TrainConfig& cfg, double measured_on_this_host) {
  if (PeakGiven(cfg)) return 0;
  return measured_on_this_host > 0 ? measured_on_this_host : MeasureSgemmGflops() * 1e9;
}

double GenerationPeakFlops(const TrainConfig& cfg, int world, double rank_peak_flops) {
  if (PeakGiven(cfg)) return cfg.hardware_peak_tflops * 1e12;
  if (rank_peak_flops <= 0) rank_peak_flops = RankPeakFlopsForMfu(cfg);
  return rank_peak_flops * world;
}

const char* MfuPeakSource(const TrainConfig& cfg) {
  return PeakGiven(cfg) ? "hardware_peak_tflops" : "measured SGEMM ceiling";
}

}  // namespace elastrain
