// Checkpoint intervals under random failures: Young's and Daly's optima and Daly's
// expected wall time. Pure functions of seconds; formulas and references in docs/cost.md.
//   J. W. Young, "A first order approximation to the optimum checkpoint interval",
//     CACM 17(9), 1974:                         tau = sqrt(2 delta M)
//   J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart
//     dumps", FGCS 22(3), 2006:                 tau = sqrt(2 delta M) [1 + 1/3 sqrt(delta/2M)
//                                                     + 1/9 (delta/2M)] - delta   (delta < 2M)
//                                               tau = M                           (delta >= 2M)
//     and the expected wall time of T_s seconds of work, failures exponential with mean M,
//     striking during work, checkpoints and restarts alike:
//                                               T_w = M e^{R/M} (e^{(tau+delta)/M} - 1) T_s / tau
// delta: seconds a checkpoint blocks training; M: mean time to interrupt; R: seconds from
// a failure to training again (detection, restart, restore); tau: seconds of work between
// checkpoints.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace elastrain {

// sqrt(2 delta M). Both arguments must be > 0.
double YoungInterval(double checkpoint_seconds, double mtti_seconds);
// Daly's higher-order optimum (see above). Both arguments must be > 0.
double DalyInterval(double checkpoint_seconds, double mtti_seconds);
// Daly's expected wall time of `work_seconds` of work saved every `interval_seconds`.
// Returns +inf when the exponentials overflow (the job would practically never finish).
double DalyExpectedWallTime(double work_seconds, double interval_seconds, double checkpoint_seconds,
                            double mtti_seconds, double restart_seconds);

// Validates the inputs of the functions above, naming the flag in the message
// ("--mtti-seconds=0: expected a number > 0").
Status CheckIntervalInputs(double checkpoint_seconds, double mtti_seconds, double restart_seconds);

// The period, in steps, for `checkpoint_period=auto` in training. The job's MTTI is
// estimated from what it has seen so far with one pseudo-failure at the prior
// (a Gamma-posterior-style estimate):
//     M = (prior_mtti_seconds + elapsed_seconds) / (1 + failures_seen)
// so with no history M is the prior, and every observed failure pulls it down. Then
// steps = round(DalyInterval(save_stall_seconds, M) / step_seconds), clamped to
// [min_steps, max_steps]. save_stall_seconds is what a save blocks the step loop
// (with async checkpointing, the snapshot copy, not the write). Inputs that make no
// estimate possible (step_seconds <= 0, save_stall_seconds <= 0, prior_mtti_seconds <= 0,
// NaN) give min_steps: save often while the numbers are unknown. min_steps < 1 counts as 1;
// max_steps < min_steps counts as min_steps.
int64_t AutoCheckpointPeriodSteps(double save_stall_seconds, double step_seconds, int failures_seen,
                                  double elapsed_seconds, double prior_mtti_seconds, int64_t min_steps,
                                  int64_t max_steps);
// The M of AutoCheckpointPeriodSteps: (prior + elapsed) / (1 + failures); negative or
// NaN elapsed counts as 0, negative failures as 0.
double EstimatedMttiSeconds(int failures_seen, double elapsed_seconds, double prior_mtti_seconds);

}  // namespace elastrain
