#include "cost/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cost/interval.h"
#include "cost/snapshot_period.h"
#include "model/flops.h"

namespace elastrain {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The event rate of `hosts` hosts of one model, per second.
double EventRate(const PreemptionModel& m, int hosts) { return hosts / m.host_mtti_seconds; }

// P(an event of `m` leaves at least one of `hosts` hosts): an event that takes them all
// leaves no buddy holding anything, whatever the placement.
double PartialLossProbability(const PreemptionModel& m, int hosts) {
  if (m.loss_sizes.empty()) return hosts > 1 ? 1.0 : 0.0;  // one host per event
  double p = 0;
  for (const LossSize& l : m.loss_sizes)
    if (l.hosts < hosts) p += l.probability;
  return p;
}

// The RAM tier's numbers for `p` (EvaluatePlan has filled its MTTI, checkpoint and wait).
void AddRamTier(const PlanRequest& req, double rate_spot, double rate_od, double wait, PlanCandidate* p) {
  const double spared = (rate_spot * PartialLossProbability(req.spot, p->hosts) +
                         rate_od * PartialLossProbability(req.on_demand, p->hosts)) /
                        (rate_spot + rate_od);
  p->ram_tier_coverage = std::min(req.ram_tier_coverage, spared);
  p->uncovered_mtti_seconds = UncoveredMttiSeconds(p->job_mtti_seconds, p->ram_tier_coverage);
  p->step_seconds = static_cast<double>(req.micro_batch * req.seq_len) * p->flops_per_token /
                    (p->offer.peak_flops * req.mfu);
  p->snapshot_period_steps = req.memory_snapshot_period;
  if (req.memory_snapshot_period_auto) {  // against the disk tier alone, at its own Daly interval
    const double covered_mtti = p->ram_tier_coverage > 0 ? p->job_mtti_seconds / p->ram_tier_coverage : INFINITY;
    const SnapshotChoice c = ChooseSnapshotInterval(
        req.snapshot_copy_seconds, covered_mtti, DalyInterval(p->checkpoint_seconds, p->job_mtti_seconds));
    p->snapshot_period_steps = SnapshotPeriodSteps(c, p->step_seconds, int64_t{1} << 40);
  }
  p->snapshot_period_seconds = static_cast<double>(p->snapshot_period_steps) * p->step_seconds;
  p->peer_restore_seconds = p->checkpoint_bytes / (p->hosts * req.peer_restore_bytes_per_second_per_host);
  p->peer_recovery_seconds = req.detection_seconds + req.restart_seconds + p->peer_restore_seconds + wait;
  p->ram_tier_bytes_per_chip = (1 + 2.0 * req.memory_snapshot_replicas) * p->checkpoint_bytes / p->chips;
}

}  // namespace

PlanCandidate EvaluatePlan(const PlanRequest& req, const AcceleratorOffer& offer, Capacity capacity, int hosts,
                           bool* fits) {
  PlanCandidate p;
  p.offer = offer;
  p.capacity = capacity;
  p.hosts = hosts;
  p.chips = hosts * offer.chips_per_host;
  const MemoryEstimate mem = EstimateTrainingMemory(req.model, req.micro_batch, req.seq_len, req.remat_full);
  const double state_bytes = static_cast<double>(mem.param_bytes + mem.grad_bytes + mem.optimizer_bytes);
  p.bytes_per_chip = state_bytes / p.chips + static_cast<double>(mem.activation_bytes);
  *fits = p.bytes_per_chip <= offer.memory_gib * kGiB;

  p.flops_per_token = TrainingFlopsPerToken(req.model, req.seq_len);
  p.ideal_seconds = req.tokens * p.flops_per_token / (p.chips * offer.peak_flops * req.mfu);
  p.checkpoint_bytes = static_cast<double>(mem.param_bytes + mem.optimizer_bytes);
  const double write_seconds = p.checkpoint_bytes / (hosts * req.checkpoint_bytes_per_second_per_host);
  p.checkpoint_seconds = write_seconds;

  int spot_hosts = hosts, od_hosts = 0;
  if (capacity == Capacity::kOnDemand) spot_hosts = 0, od_hosts = hosts;
  if (capacity == Capacity::kMix) {
    od_hosts = std::min(hosts, static_cast<int>(std::ceil(req.mix_on_demand_fraction * hosts - 1e-9)));
    spot_hosts = hosts - od_hosts;
  }
  p.on_demand_hosts = od_hosts;
  const double rate_spot = EventRate(req.spot, spot_hosts), rate_od = EventRate(req.on_demand, od_hosts);
  p.job_mtti_seconds = 1.0 / (rate_spot + rate_od);
  // The replacement wait of whichever kind of host failed, weighted by how often each does.
  const double wait =
      (rate_spot * req.spot.replacement_seconds + rate_od * req.on_demand.replacement_seconds) / (rate_spot + rate_od);
  // Restoring reads what a save writes, at the same bandwidth.
  p.recovery_seconds = req.detection_seconds + req.restart_seconds + write_seconds + wait;
  if (req.memory_snapshot_replicas > 0) AddRamTier(req, rate_spot, rate_od, wait, &p);
  if (req.memory_snapshot_replicas > 0 && p.snapshot_period_steps > 0) {
    const RamTierCost tier{p.ram_tier_coverage, p.snapshot_period_seconds, p.peer_recovery_seconds};
    p.interval_seconds = DalyInterval(p.checkpoint_seconds, p.uncovered_mtti_seconds);
    // Each copy adds snapshot_copy_seconds to a step: the work stretches by that share.
    const double work = p.snapshot_period_seconds > 0
                            ? p.ideal_seconds * (1 + req.snapshot_copy_seconds / p.snapshot_period_seconds)
                            : p.ideal_seconds;
    p.expected_seconds = RamTierExpectedWallTime(work, p.interval_seconds, p.checkpoint_seconds,
                                                 p.job_mtti_seconds, p.recovery_seconds, tier);
  } else {
    if (req.memory_snapshot_replicas > 0) {  // auto turned it off: a disk-only plan
      p.ram_tier_coverage = 0;
      p.uncovered_mtti_seconds = p.job_mtti_seconds;
      p.peer_recovery_seconds = p.peer_restore_seconds = 0;
    }
    p.interval_seconds = DalyInterval(p.checkpoint_seconds, p.job_mtti_seconds);
    p.expected_seconds = DalyExpectedWallTime(p.ideal_seconds, p.interval_seconds, p.checkpoint_seconds,
                                              p.job_mtti_seconds, p.recovery_seconds);
  }
  p.goodput = p.ideal_seconds / p.expected_seconds;
  p.usd_per_hour = offer.chips_per_host * (spot_hosts * offer.spot_usd_per_chip_hour +
                                           od_hosts * offer.on_demand_usd_per_chip_hour);
  p.cost_usd = p.usd_per_hour * p.expected_seconds / 3600.0;
  p.meets_deadline = req.deadline_seconds <= 0 || p.expected_seconds <= req.deadline_seconds;
  p.meets_budget = req.budget_usd <= 0 || p.cost_usd <= req.budget_usd;
  return p;
}

PlanReport EnumeratePlans(const PlanRequest& req, const std::vector<AcceleratorOffer>& offers) {
  PlanReport r;
  for (const AcceleratorOffer& o : offers) {
    bool any = false;
    double best_bytes = 0;
    for (Capacity c : {Capacity::kSpot, Capacity::kOnDemand, Capacity::kMix})
      for (int h = req.min_hosts; h <= req.max_hosts; ++h) {
        bool fits = false;
        PlanCandidate p = EvaluatePlan(req, o, c, h, &fits);
        best_bytes = p.bytes_per_chip;  // the last (largest) world needs the least
        if (!fits) continue;
        any = true;
        r.candidates.push_back(std::move(p));
      }
    if (!any)
      r.rejected.push_back(fmt::format(
          "{}: does not fit: needs {:.1f} GiB per chip even at {} hosts ({} chips), has {:.0f} GiB", o.name,
          best_bytes / kGiB, req.max_hosts, req.max_hosts * o.chips_per_host, o.memory_gib));
  }
  return r;
}

std::vector<PlanCandidate> RankPlans(const std::vector<PlanCandidate>& candidates) {
  std::vector<PlanCandidate> ok;
  for (const PlanCandidate& p : candidates)
    if (p.meets_deadline && p.meets_budget && std::isfinite(p.expected_seconds)) ok.push_back(p);
  std::stable_sort(ok.begin(), ok.end(), [](const PlanCandidate& a, const PlanCandidate& b) {
    if (a.cost_usd != b.cost_usd) return a.cost_usd < b.cost_usd;
    return a.expected_seconds < b.expected_seconds;
  });
  return ok;
}

}  // namespace elastrain
