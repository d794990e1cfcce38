// The denominator of MFU (model FLOP/s over peak FLOP/s), decided in one place.
//
// hardware_peak_tflops > 0 gives the peak of the whole generation and no SGEMM probe
// runs anywhere. Otherwise the peak is the world size times one rank's measured SGEMM
// ceiling (model/flops.h explains why a CPU's SGEMM ceiling stands in for its peak).
// A worker process measures that ceiling once, with RankPeakFlopsForMfu, and passes it
// to each generation (WorkerContext::peak_flops); `elastrain train` with one worker
// leaves it 0 and the generation measures it itself, only when it is needed.
#pragma once

#include "config/config.h"

namespace elastrain {

// One rank's SGEMM ceiling in FLOP/s: 0 without measuring when the config gives
// hardware_peak_tflops, since nothing then needs it; else `measured_on_this_host` when an
// earlier worker of this host measured it (> 0); else measured now (about 0.3 s).
double RankPeakFlopsForMfu(const TrainConfig& cfg, double measured_on_this_host = 0);

// The MFU denominator of a generation of `world` ranks, FLOP/s: hardware_peak_tflops
// when given, else world x `rank_peak_flops` (measured here when it is <= 0).
double GenerationPeakFlops(const TrainConfig& cfg, int world, double rank_peak_flops);

// What GenerationPeakFlops used, for the log: "hardware_peak_tflops" or
// "measured SGEMM ceiling".
const char* MfuPeakSource(const TrainConfig& cfg);

}  // namespace elastrain
