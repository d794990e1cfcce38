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

// ---- The RAM tier (issue #18; docs/cost.md, "The RAM tier") -----------------------------
// Sharded jobs copy each rank's shard into buddy ranks' RAM every few steps. An
// interruption that leaves every shard of one snapshot alive (owner or buddy) is
// "covered": the job restores from peers and redoes at most one snapshot period. Only an
// uncovered one (a shard and all its buddies lost at once, or a whole-job restart) goes
// back to the disk checkpoint. So the disk tier sees interruptions at the uncovered
// rate: its Daly interval uses M_u = M / (1 - coverage).

// The fraction of interruptions assumed uncovered before the job has seen any: with one
// buddy on another host, a failure is uncovered when it takes a host and its buddy host
// together (a correlated loss of 2+ hosts that happens to include a pair, which in the
// spot model of section 3 is at most the 30% of events that take 2 or 4 hosts, and for
// a ring over many hosts far fewer) or restarts the whole job. 0.1 is an assumption,
// not a measurement, chosen to stay on the cautious side of those.
constexpr double kRamTierUncoveredFraction = 0.1;

// M / (1 - coverage): the mean time between interruptions the RAM tier does not cover.
// +inf when coverage >= 1; coverage <= 0 or NaN gives M.
double UncoveredMttiSeconds(double mtti_seconds, double coverage);

struct RamTierCost {
  double coverage = 0;                 // P(an interruption is covered); 0: no RAM tier
  double snapshot_period_seconds = 0;  // s: compute seconds between snapshots
  double recovery_seconds = 0;         // R_c: interruption -> training again, from peers
};
// Expected wall time with both tiers. Covered interruptions strike at rate c/M; each
// costs the time to get R_c seconds of recovery through without another interruption,
// M (e^{R_c/M} - 1) (Daly's restart term), plus s/2 of redone work (the mean work since
// the last snapshot). So they stretch every second by
//   F = 1 + c (e^{R_c/M} - 1) + c s / 2M,
// and Daly's segment of tau + delta takes F (tau + delta) of wall time, exposed as a
// whole to the uncovered interruptions (mean M_u) that send the job back to disk:
//   T_w = M_u e^{R/M_u} (e^{F (tau + delta) / M_u} - 1) T_s / tau
// With coverage 0 this is DalyExpectedWallTime exactly; with coverage 1 (M_u infinite)
// it is F (tau + delta) T_s / tau. +inf where the exponentials overflow.
double RamTierExpectedWallTime(double work_seconds, double interval_seconds, double checkpoint_seconds,
                               double mtti_seconds, double restart_seconds, const RamTierCost& tier);

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
// With the RAM tier, failures_seen counts only the uncovered failures (those that went
// to disk) and prior_uncovered_fraction is kRamTierUncoveredFraction: the pseudo-failure
// sits at prior / fraction, i.e. M is the MTTI of uncovered interruptions,
//     M_u = (prior_mtti_seconds / prior_uncovered_fraction + elapsed) / (1 + uncovered)
// The default 1 (no RAM tier) is the formula above; a fraction outside (0, 1] or NaN
// counts as 1 (no credit for a RAM tier that is not described).
int64_t AutoCheckpointPeriodSteps(double save_stall_seconds, double step_seconds, int failures_seen,
                                  double elapsed_seconds, double prior_mtti_seconds, int64_t min_steps,
                                  int64_t max_steps, double prior_uncovered_fraction = 1.0);
// The M of AutoCheckpointPeriodSteps: (prior / fraction + elapsed) / (1 + failures);
// negative or NaN elapsed counts as 0, negative failures as 0.
double EstimatedMttiSeconds(int failures_seen, double elapsed_seconds, double prior_mtti_seconds,
                            double prior_uncovered_fraction = 1.0);

}  // namespace elastrain
