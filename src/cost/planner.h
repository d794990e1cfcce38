// The cost planner: for every catalog offer x capacity (spot, on-demand, mix) x host
// count, does the model fit, how long does training take with failures and checkpoints
// (Daly's interval and expected wall time, cost/interval.h), what does it cost, and
// which plan is cheapest within a deadline and a budget. With the RAM tier
// (memory_snapshot_replicas > 0) covered interruptions restore from peers and the disk
// interval follows the uncovered ones (cost/interval.h). Every formula: docs/cost.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cost/catalog.h"
#include "cost/interval.h"
#include "cost/preemption.h"
#include "model/model_config.h"

namespace elastrain {

constexpr double kDefaultMfu = 0.40;
constexpr double kDefaultCheckpointBytesPerSecondPerHost = 1e9;  // 1 GB/s to object storage
constexpr double kDefaultDetectionSeconds = 30;   // preemption notice / worker socket closing
constexpr double kDefaultRestartSeconds = 120;    // new generation: processes, rendezvous, mesh
constexpr double kDefaultMixOnDemandFraction = 0.25;
// Restoring a shard from a buddy's RAM: most of a 100 Gb/s NIC per host.
constexpr double kDefaultPeerRestoreBytesPerSecondPerHost = 10e9;

struct PlanRequest {
  ModelConfig model;
  int64_t seq_len = 0;
  int64_t micro_batch = 1;   // rows per chip (per_device_batch_size)
  bool remat_full = false;
  double tokens = 0;         // training tokens
  double mfu = kDefaultMfu;
  int min_hosts = 1, max_hosts = 128;
  double deadline_seconds = 0;  // 0: none
  double budget_usd = 0;        // 0: none
  PreemptionModel spot = DefaultPreemption(Capacity::kSpot);
  PreemptionModel on_demand = DefaultPreemption(Capacity::kOnDemand);
  double mix_on_demand_fraction = kDefaultMixOnDemandFraction;  // of the hosts, rounded up
  double checkpoint_bytes_per_second_per_host = kDefaultCheckpointBytesPerSecondPerHost;
  double detection_seconds = kDefaultDetectionSeconds;
  double restart_seconds = kDefaultRestartSeconds;
  // The RAM tier: 0 replicas is a disk-only job (the planner's default).
  int memory_snapshot_replicas = 0;     // buddy copies of each shard
  int64_t memory_snapshot_period = 1;   // steps between snapshots
  // memory_snapshot_period=auto: the period, or off, chosen per plan as training chooses it
  // (cost/snapshot_period.h), from snapshot_copy_seconds and the plan's covered MTTI.
  bool memory_snapshot_period_auto = false;
  double snapshot_copy_seconds = 0;     // what a copy adds to a step (0: it hides behind compute)
  double ram_tier_coverage = 1 - kRamTierUncoveredFraction;  // P(covered), in [0, 1)
  double peer_restore_bytes_per_second_per_host = kDefaultPeerRestoreBytesPerSecondPerHost;
};

struct PlanCandidate {
  AcceleratorOffer offer;
  Capacity capacity = Capacity::kSpot;
  int hosts = 0, chips = 0;
  int on_demand_hosts = 0;        // mix: the hosts bought on demand
  double bytes_per_chip = 0;      // (params + grads + AdamW) / chips + activations
  double flops_per_token = 0;
  double ideal_seconds = 0;       // tokens * flops_per_token / (chips * peak * mfu)
  double checkpoint_bytes = 0;    // params + AdamW m, v (fp32)
  double checkpoint_seconds = 0;  // delta: checkpoint_bytes / (hosts * bandwidth)
  double recovery_seconds = 0;    // R: detection + restart + restore + replacement wait
  double job_mtti_seconds = 0;    // M: 1 / sum over hosts of 1 / host MTTI
  double interval_seconds = 0;    // Daly's tau
  double expected_seconds = 0;    // Daly's T_w
  double goodput = 0;             // ideal / expected
  double usd_per_hour = 0;        // every chip, at its capacity's price
  double cost_usd = 0;            // usd_per_hour * expected hours
  bool meets_deadline = true, meets_budget = true;
  // The RAM tier (all 0 when it is off):
  double ram_tier_coverage = 0;        // c: the request's, at most P(an event spares a host)
  double uncovered_mtti_seconds = 0;   // M_u = M / (1 - c): the disk interval's MTTI
  double step_seconds = 0;             // micro_batch x seq_len tokens per chip, at the plan's speed
  double snapshot_period_seconds = 0;  // s = memory_snapshot_period x step_seconds
  int64_t snapshot_period_steps = 0;   // the period used (auto: chosen; 0: auto turned the tier off)
  double peer_restore_seconds = 0;     // checkpoint_bytes / (hosts x peer bandwidth)
  double peer_recovery_seconds = 0;    // R_c: detection + restart + peer restore + replacement wait
  double ram_tier_bytes_per_chip = 0;  // host RAM per rank: (1 + 2 replicas) x checkpoint_bytes / chips
};

struct PlanReport {
  std::vector<PlanCandidate> candidates;  // every plan that fits in memory
  std::vector<std::string> rejected;      // one line per offer that never fits, saying why
};

// Candidates for every offer x capacity x host count in [min_hosts, max_hosts].
PlanReport EnumeratePlans(const PlanRequest& req, const std::vector<AcceleratorOffer>& offers);
// One candidate (what EnumeratePlans computes per entry); fits is false when it does
// not fit in memory.
PlanCandidate EvaluatePlan(const PlanRequest& req, const AcceleratorOffer& offer, Capacity capacity, int hosts,
                           bool* fits);
// The plans meeting deadline and budget, cheapest first (ties: sooner first).
std::vector<PlanCandidate> RankPlans(const std::vector<PlanCandidate>& candidates);

}  // namespace elastrain
