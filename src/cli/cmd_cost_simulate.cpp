// `elastrain cost simulate`: Monte Carlo of completion time and cost under
// interruptions (cost/simulator.h), either of a planned job (the same arguments as
// `cost plan`, optionally pinned with --offer/--capacity/--hosts; all three capacities
// of the chosen offer and host count are simulated side by side) or of a job given by
// its numbers (--work-hours ...). Exit codes: 0 printed, 2 bad flags or inputs.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/cost_args.h"
#include "cli/cost_setup.h"
#include "cost/interval.h"
#include "cost/planner.h"
#include "cost/simulator.h"
#include "cost/snapshot_period.h"
#include "cost/svg_plot.h"

namespace elastrain {

namespace {

constexpr int kDefaultTrials = 1000;
constexpr uint64_t kDefaultSeed = 1;

int Fail(const Status& st) { return FailCommand("cost simulate", st); }

struct Scenario {
  std::string label;
  SimJob job;
  PreemptionModel failures;
  double closed_form_seconds = 0;  // Daly's T_w for the same job (the planner's estimate)
};

// The failure process of a plan's hosts; a mix is one process whose events come from
// spot or on-demand hosts in proportion to their rates.
PreemptionModel FailuresOf(const PlanRequest& req, const PlanCandidate& p) {
  if (p.capacity == Capacity::kSpot) return req.spot;
  if (p.capacity == Capacity::kOnDemand) return req.on_demand;
  const int spot = p.hosts - p.on_demand_hosts;
  const double rs = spot / req.spot.host_mtti_seconds, ro = p.on_demand_hosts / req.on_demand.host_mtti_seconds;
  PreemptionModel m;
  m.host_mtti_seconds = p.hosts / (rs + ro);
  m.replacement_seconds = (rs * req.spot.replacement_seconds + ro * req.on_demand.replacement_seconds) / (rs + ro);
  m.loss_sizes.clear();
  for (const LossSize& l : req.spot.loss_sizes) m.loss_sizes.push_back({l.hosts, l.probability * rs / (rs + ro)});
  for (const LossSize& l : req.on_demand.loss_sizes) m.loss_sizes.push_back({l.hosts, l.probability * ro / (rs + ro)});
  return m;
}

Result<std::vector<Scenario>> PlannedScenarios(CostArgs& a, std::string* header) {
  for (const char* f : {"--snapshot-period-seconds", "--peer-restore-seconds"})
    if (a.Has(f))
      return Status::InvalidArgument(fmt::format(
          "{}: describes a given job (--work-hours); a plan takes --memory-snapshot-replicas N and "
          "--memory-snapshot-period STEPS",
          f));
  ELASTRAIN_ASSIGN_OR_RETURN(CostSetup setup, BuildCostSetup(a));
  const PlanRequest& req = setup.req;
  *header = DescribeSetup(setup);
  std::vector<AcceleratorOffer> offers = setup.offers;
  if (a.Has("--offer")) {
    const std::string name = a.String("--offer", "");
    std::string names;
    std::vector<AcceleratorOffer> pick;
    for (const AcceleratorOffer& o : offers) {
      names += (names.empty() ? "" : ", ") + o.name;
      if (o.name == name) pick.push_back(o);
    }
    if (pick.empty())
      return Status::InvalidArgument(fmt::format("--offer {}: not in the catalog (expected one of {})", name, names));
    offers = pick;
  }
  std::vector<Capacity> caps = {Capacity::kSpot, Capacity::kOnDemand, Capacity::kMix};
  if (a.Has("--capacity")) {
    const std::string c = a.String("--capacity", "");
    const std::optional<Capacity> cap = ParseChoice(kCapacityChoices, c);
    if (!cap) return Status::InvalidArgument(ChoiceRefusal(kCapacityChoices, "--capacity " + c));
    caps = {*cap};
  }
  // Without --hosts: the best plan's offer and host count (among the chosen capacities).
  ELASTRAIN_ASSIGN_OR_RETURN(int64_t hosts, a.Integer("--hosts", 0, 1, 100000));
  if (hosts > 0 && !a.Has("--offer"))
    return Status::InvalidArgument(fmt::format("--hosts {}: expected --offer NAME with it (which accelerator)", hosts));
  AcceleratorOffer offer = offers[0];
  if (hosts == 0) {
    PlanReport report = EnumeratePlans(req, offers);
    std::vector<PlanCandidate> ranked = RankPlans(report.candidates);
    std::erase_if(ranked, [&](const PlanCandidate& p) {
      return std::find(caps.begin(), caps.end(), p.capacity) == caps.end();
    });
    if (ranked.empty())
      return Status::InvalidArgument(
          "no plan meets the deadline and budget to simulate (see `elastrain cost plan`; or pin --offer and --hosts)");
    offer = ranked[0].offer;
    hosts = ranked[0].hosts;
  }
  ELASTRAIN_ASSIGN_OR_RETURN(int64_t min_hosts, a.Integer("--min-hosts", hosts, 1, hosts));
  ELASTRAIN_ASSIGN_OR_RETURN(double resize, a.Number("--resize-seconds", req.restart_seconds, 0, INFINITY));
  std::vector<Scenario> out;
  for (Capacity c : caps) {
    bool fits = false;
    const PlanCandidate p = EvaluatePlan(req, offer, c, static_cast<int>(hosts), &fits);
    if (!fits)
      return Status::InvalidArgument(fmt::format("--hosts {}: model_name={} does not fit {} ({:.1f} GiB per chip, has {:g})",
                                                 hosts, req.model.name, offer.name, p.bytes_per_chip / (1 << 30),
                                                 offer.memory_gib));
    Scenario s;
    s.label = fmt::format("{} {} x{}", offer.name, CapacityName(c), hosts);
    s.job.work_seconds = p.ideal_seconds;
    s.job.hosts = static_cast<int>(hosts);
    s.job.min_hosts = static_cast<int>(min_hosts);
    s.job.interval_seconds = p.interval_seconds;
    s.job.checkpoint_seconds = p.checkpoint_seconds;
    s.job.detection_seconds = req.detection_seconds;
    s.job.restart_seconds = req.restart_seconds + p.checkpoint_seconds;  // restore reads what a save wrote
    s.job.resize_seconds = resize;
    s.job.usd_per_host_hour = p.usd_per_hour / hosts;
    s.job.ram_tier_coverage = p.ram_tier_coverage;  // 0 unless --memory-snapshot-replicas
    s.job.snapshot_period_seconds = p.snapshot_period_seconds;
    s.job.snapshot_copy_seconds = p.ram_tier_coverage > 0 ? req.snapshot_copy_seconds : 0;
    s.job.peer_restore_seconds = req.restart_seconds + p.peer_restore_seconds;
    s.failures = FailuresOf(req, p);
    s.closed_form_seconds = p.expected_seconds;
    out.push_back(s);
  }
  return out;
}

// --snapshot-period-seconds auto: RawScenario chooses the period (ChooseRawSnapshotPeriod).
bool AutoSnapshotPeriod(const CostArgs& a) { return a.String("--snapshot-period-seconds", "") == "auto"; }

// --ram-tier-coverage C (in [0, 1); 0, the default: disk only) and, with C > 0, the
// snapshot period and the restart from peers.
Status ReadRawRamTier(const CostArgs& a, SimJob* job) {
  // 1: every interruption restores from peers (a data-parallel job that loses one replica
  // at a time: the survivors hold the state).
  ELASTRAIN_ASSIGN_OR_RETURN(job->ram_tier_coverage, a.Number("--ram-tier-coverage", 0, 0, 1));
  if (job->ram_tier_coverage == 0) {
    for (const char* f : {"--snapshot-period-seconds", "--peer-restore-seconds", "--snapshot-copy-seconds"})
      if (a.Has(f))
        return Status::InvalidArgument(
            fmt::format("{}={}: the RAM tier is off; expected --ram-tier-coverage C > 0 with it", f, a.String(f, "")));
    return Status::OK();
  }
  if (!AutoSnapshotPeriod(a)) {
    auto period = a.Number("--snapshot-period-seconds", 0, 0, INFINITY);
    if (!period.ok())
      return Status::InvalidArgument(period.status().message() + ", or auto (chosen as training chooses it)");
    job->snapshot_period_seconds = period.value();
  }
  ELASTRAIN_ASSIGN_OR_RETURN(job->snapshot_copy_seconds, a.Number("--snapshot-copy-seconds", 0, 0, 1e9));
  if (job->snapshot_copy_seconds > 0 && job->snapshot_period_seconds <= 0 && !AutoSnapshotPeriod(a))
    return Status::InvalidArgument(fmt::format(
        "--snapshot-copy-seconds={}: a copy that costs time needs --snapshot-period-seconds S > 0 (or auto)",
        a.String("--snapshot-copy-seconds", "")));
  ELASTRAIN_ASSIGN_OR_RETURN(job->peer_restore_seconds,
                             a.Number("--peer-restore-seconds", job->restart_seconds, 0, INFINITY));
  return Status::OK();
}

// --snapshot-period-seconds auto: the choice training makes (cost/snapshot_period.h), at
// the covered MTTI (the job's MTTI, or the trace's mean interval, over the coverage)
// against the disk interval the job would have without the tier. Off: coverage 0.
std::string ChooseRawSnapshotPeriod(const CostArgs& a, const std::vector<PreemptionEvent>& trace, double mtti,
                                    Scenario* s) {
  SimJob& job = s->job;
  if (!trace.empty()) {
    const double span = job.horizon_seconds > 0 ? job.horizon_seconds : trace.back().time_seconds;
    if (span > 0) mtti = span / static_cast<double>(trace.size());
  }
  const double tau_off = a.Has("--interval-seconds") ? job.interval_seconds : DalyInterval(job.checkpoint_seconds, mtti);
  const SnapshotChoice c = ChooseSnapshotInterval(job.snapshot_copy_seconds, mtti / job.ram_tier_coverage, tau_off);
  std::string note = fmt::format(
      "  memory_snapshot_period=auto: a copy costs {:g} s, covered interruptions come every {:.1f} s, the disk "
      "interval would be {:.1f} s: Young's interval for the copy {:.2f} s is {} half of it, so the RAM tier is {}\n",
      job.snapshot_copy_seconds, mtti / job.ram_tier_coverage, tau_off, c.interval_seconds,
      c.on ? "under" : "not under", c.on ? fmt::format("on, a copy every {:.2f} s", c.interval_seconds) : "off");
  if (c.on) {
    job.snapshot_period_seconds = c.interval_seconds;
    return note;
  }
  job.ram_tier_coverage = job.snapshot_period_seconds = job.snapshot_copy_seconds = 0;
  job.interval_seconds = tau_off;
  return note;
}

Result<std::vector<Scenario>> RawScenario(const CostArgs& a, const std::vector<PreemptionEvent>& trace,
                                          std::string* header) {
  Scenario s;
  if (!a.passthrough().empty())
    return Status::InvalidArgument(fmt::format(
        "unexpected argument '{}': config keys and files describe a plan, which needs tokens=N", a.passthrough()[0]));
  if ((!a.Has("--work-hours") && !a.Has("--horizon-seconds")) || !a.Has("--checkpoint-seconds"))
    return Status::InvalidArgument(
        "expected tokens=N (simulate a plan) or --work-hours H (or --horizon-seconds S) and --checkpoint-seconds D "
        "(simulate a given job)");
  // --horizon-seconds S: a window of S wall seconds of a longer job (e.g. a replayed trace's).
  ELASTRAIN_ASSIGN_OR_RETURN(s.job.horizon_seconds, a.Number("--horizon-seconds", 0, 0, INFINITY, true));
  ELASTRAIN_ASSIGN_OR_RETURN(double hours, a.Number("--work-hours", 2 * s.job.horizon_seconds / 3600, 0, INFINITY, true));
  s.job.work_seconds = hours * 3600;
  ELASTRAIN_ASSIGN_OR_RETURN(int64_t hosts, a.Integer("--hosts", 1, 1, 100000));
  ELASTRAIN_ASSIGN_OR_RETURN(int64_t min_hosts, a.Integer("--min-hosts", hosts, 1, hosts));
  s.job.hosts = static_cast<int>(hosts), s.job.min_hosts = static_cast<int>(min_hosts);
  ELASTRAIN_ASSIGN_OR_RETURN(s.job.checkpoint_seconds, a.Number("--checkpoint-seconds", 0, 0, INFINITY, true));
  ELASTRAIN_ASSIGN_OR_RETURN(s.job.detection_seconds, a.Number("--detection-seconds", kDefaultDetectionSeconds, 0, INFINITY));
  ELASTRAIN_ASSIGN_OR_RETURN(s.job.restart_seconds, a.Number("--restart-seconds", kDefaultRestartSeconds, 0, INFINITY));
  ELASTRAIN_ASSIGN_OR_RETURN(s.job.resize_seconds, a.Number("--resize-seconds", s.job.restart_seconds, 0, INFINITY));
  ELASTRAIN_ASSIGN_OR_RETURN(s.job.usd_per_host_hour, a.Number("--usd-per-host-hour", 0, 0, INFINITY));
  ELASTRAIN_ASSIGN_OR_RETURN(s.failures.host_mtti_seconds, a.Seconds("--host-mtti", kDefaultSpotHostMttiSeconds, 3600));
  ELASTRAIN_ASSIGN_OR_RETURN(s.failures.replacement_seconds, a.Number("--replacement-seconds", 0, 0, INFINITY));
  if (a.Has("--loss-sizes")) {
    ELASTRAIN_ASSIGN_OR_RETURN(s.failures.loss_sizes, ParseLossSizes(a.String("--loss-sizes", ""), "--loss-sizes"));
  }
  ELASTRAIN_RETURN_IF_ERROR(ReadRawRamTier(a, &s.job));
  const double mtti = s.failures.host_mtti_seconds / hosts;
  const double uncovered_mtti = UncoveredMttiSeconds(mtti, s.job.ram_tier_coverage);
  const double daly = DalyInterval(s.job.checkpoint_seconds, uncovered_mtti);
  ELASTRAIN_ASSIGN_OR_RETURN(s.job.interval_seconds, a.Number("--interval-seconds",
                                                              std::isfinite(daly) ? daly : s.job.work_seconds, 0,
                                                              INFINITY, true));
  if (s.job.ram_tier_coverage > 0 && AutoSnapshotPeriod(a))
    *header += ChooseRawSnapshotPeriod(a, trace, mtti, &s);
  const RamTierCost tier{s.job.ram_tier_coverage, s.job.snapshot_period_seconds,
                         s.job.detection_seconds + s.job.peer_restore_seconds + s.failures.replacement_seconds};
  s.closed_form_seconds =
      RamTierExpectedWallTime(s.job.work_seconds, s.job.interval_seconds, s.job.checkpoint_seconds, mtti,
                              s.job.detection_seconds + s.job.restart_seconds + s.failures.replacement_seconds, tier);
  s.label = fmt::format("{:g} h of work x{} hosts", hours, hosts);
  return std::vector<Scenario>{s};
}

}  // namespace

int RunCostSimulate(const std::vector<std::string>& argv) {
  std::set<std::string> flags = CostSetupFlags();
  for (const char* f : {"--offer", "--capacity", "--hosts", "--min-hosts", "--resize-seconds", "--trials", "--seed",
                        "--trace", "--svg", "--work-hours", "--checkpoint-seconds", "--interval-seconds", "--host-mtti",
                        "--loss-sizes", "--replacement-seconds", "--usd-per-host-hour", "--snapshot-period-seconds",
                        "--peer-restore-seconds", "--horizon-seconds", "--snapshot-copy-seconds"})
    flags.insert(f);
  auto parsed = CostArgs::Parse(argv, flags);
  if (!parsed.ok()) return Fail(parsed.status());
  CostArgs& a = parsed.value();
  auto trials = a.Integer("--trials", kDefaultTrials, 1, 10'000'000);
  if (!trials.ok()) return Fail(trials.status());
  auto seed = a.Integer("--seed", kDefaultSeed, 0, INT64_MAX);
  if (!seed.ok()) return Fail(seed.status());
  std::vector<PreemptionEvent> trace;
  if (a.Has("--trace")) {
    auto t = LoadPreemptionTrace(a.String("--trace", ""));
    if (!t.ok()) return Fail(t.status());
    trace = std::move(t.value());
  }
  std::string header;
  auto scenarios = a.HasKey("tokens") ? PlannedScenarios(a, &header) : RawScenario(a, trace, &header);
  if (!scenarios.ok()) return Fail(scenarios.status());

  std::string o = header;
  o += trace.empty() ? fmt::format("{} trials, seed {}, interruptions drawn from the MTTI model\n", *trials, *seed)
                     : fmt::format("{} trials, seed {}, interruptions replayed from {} ({} events)\n", *trials, *seed,
                                   a.String("--trace", ""), trace.size());
  o += fmt::format("{:<34} {:>6} {:>6} {:>6} {:>6} {:>8} {:>6} {:>10} {:>10} {:>10} {:>7} {:>5}\n", "scenario",
                   "tau_s", "ideal_h", "mean_h", "p50_h", "p90_h", "daly_h", "mean_usd", "p50_usd", "p90_usd",
                   "interr", "unfin");
  std::vector<PlotSeries> plot;
  std::string ram_lines, breakdown_lines;
  for (const Scenario& s : scenarios.value()) {
    auto sum = Simulate(s.job, s.failures, trace, static_cast<int>(*trials), static_cast<uint64_t>(*seed));
    if (!sum.ok()) return Fail(sum.status());
    const SimSummary& r = sum.value();
    o += fmt::format("{:<34} {:>6.0f} {:>7.1f} {:>6.1f} {:>6.1f} {:>8.1f} {:>6.1f} {:>10.0f} {:>10.0f} {:>10.0f} "
                     "{:>7.1f} {:>5}\n",
                     s.label, s.job.interval_seconds, s.job.work_seconds / 3600, r.mean_seconds / 3600,
                     r.p50_seconds / 3600, r.p90_seconds / 3600, s.closed_form_seconds / 3600, r.mean_cost,
                     r.p50_cost, r.p90_cost, r.mean_interruptions, r.unfinished);
    if (s.job.ram_tier_coverage > 0)
      ram_lines += fmt::format("  {}: RAM tier covers {:.2f} ({:.1f} of {:.1f} interruptions per trial restored from "
                               "peers in {:.0f} s; snapshot every {:.1f} s of compute, each adding {:g} s)\n",
                               s.label, s.job.ram_tier_coverage, r.mean_covered, r.mean_interruptions,
                               s.job.peer_restore_seconds, s.job.snapshot_period_seconds, s.job.snapshot_copy_seconds);
    const SimBreakdown& m = r.mean_breakdown;
    const double wall = std::max(m.total(), 1e-12);
    breakdown_lines += fmt::format(
        "  {}: goodput {:.1f}% | productive {:.1f}% | redone {:.1f}% | recovery {:.1f}% | checkpoint {:.1f}% | "
        "waiting {:.1f}%\n",
        s.label, 100 * m.goodput(), 100 * m.productive / wall, 100 * m.redone / wall, 100 * m.recovery / wall,
        100 * m.checkpoint / wall, 100 * m.waiting / wall);
    PlotSeries ps{s.label, {}};
    for (const SimTrial& t : r.trials) ps.points.push_back({t.completion_seconds / 3600, t.cost_usd});
    plot.push_back(std::move(ps));
  }
  o += "where the time went (mean of the trials, the categories of `elastrain report`'s goodput):\n" + breakdown_lines;
  o += ram_lines;
  o += "daly_h: Daly's closed-form expected time with the mean replacement wait in R (docs/cost.md)";
  o += ram_lines.empty() ? "\n" : "; with the RAM tier, at the uncovered MTTI and stretched by covered failures\n";
  if (a.Has("--svg")) {
    const std::string path = a.String("--svg", "");
    std::ofstream out(path);
    out << CostTimeSvg(plot, fmt::format("{} trials: cost against completion time", *trials));
    if (!out.good())
      return Fail(Status::InvalidArgument(fmt::format("--svg {}: cannot write that file", path)));
    o += fmt::format("wrote {}\n", path);
  }
  std::fputs(o.c_str(), stdout);
  return 0;
}

}  // namespace elastrain
