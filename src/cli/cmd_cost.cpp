// `elastrain cost interval|plan|simulate`: checkpoint intervals, the cost planner and
// the spot simulator (src/cost/, docs/cost.md). Exit codes: 0 printed, 2 bad flags,
// inputs or files, or (plan) no plan meets the deadline and budget.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/cost_args.h"
#include "cli/cost_setup.h"
#include "cost/interval.h"
#include "cost/planner.h"

namespace elastrain {

int RunCostSimulate(const std::vector<std::string>& args);  // cmd_cost_simulate.cpp

namespace {

constexpr int kDefaultPlansShown = 10;

int Fail(const Status& st) { return FailCommand("cost", st); }

// Each subcommand's own usage; `cost --help` prints them all, `cost SUB --help` its own.
constexpr char kIntervalUsage[] =
    "  interval --checkpoint-seconds D --mtti-seconds M [--restart-seconds R] [--work-seconds T]\n"
    "      Young's and Daly's optimal checkpoint intervals; with T, Daly's expected wall time\n";
constexpr char kPlanUsage[] =
    "  plan [CONFIG.yml] model_name=NAME tokens=N [key=value ...] [--deadline 72h] [--budget USD]\n"
    "       [--mfu 0.4 | --metrics RUN/metrics.jsonl] [--workers MIN:MAX] [--catalog PATH] [--top K]\n"
    "       [--checkpoint-gbps-per-host 1] [--detection-seconds 30] [--restart-seconds 120]\n"
    "       [--spot-host-mtti 24h] [--spot-loss-sizes 1:0.7,2:0.2,4:0.1] [--spot-replacement-seconds 600]\n"
    "       [--on-demand-host-mtti 6336h] [--on-demand-loss-sizes 1:1] [--on-demand-replacement-seconds 300]\n"
    "       [--mix-on-demand-fraction 0.25] [--memory-snapshot-replicas 0 (RAM tier off) | 1..8]\n"
    "       [--memory-snapshot-period 1 | auto] [--snapshot-copy-seconds 0] [--ram-tier-coverage 0.9]\n"
    "       [--peer-restore-gbps-per-host 10]\n"
    "      every catalog offer x spot, on-demand, mix x host count: fit, time, goodput, cost; cheapest first\n";
constexpr char kSimulateUsage[] =
    "  simulate [plan arguments] [--offer NAME] [--capacity spot|on-demand|mix] [--hosts N]\n"
    "           [--min-hosts N] [--resize-seconds S] [--trials 1000] [--seed 1] [--trace FILE] [--svg PATH]\n"
    "  simulate --work-hours H|--horizon-seconds S [--hosts N] [--min-hosts N] --checkpoint-seconds D\n"
    "           [--interval-seconds T] [--detection-seconds S] [--restart-seconds S]\n"
    "           [--host-mtti 24h] [--loss-sizes 1:1] [--replacement-seconds W] [--usd-per-host-hour P]\n"
    "           [--ram-tier-coverage C --snapshot-period-seconds S|auto --snapshot-copy-seconds X\n"
    "            --peer-restore-seconds P] ...\n"
    "      Monte Carlo (or a replayed trace) of completion time and cost: p50, p90, an SVG scatter\n";

void PrintCostUsage() {
  std::printf("usage: elastrain cost <interval|plan|simulate> [flags]  (formulas: docs/cost.md)\n%s%s%s",
              kIntervalUsage, kPlanUsage, kSimulateUsage);
}

// False for a name that is no subcommand.
bool PrintSubcommandUsage(const std::string& sub) {
  const char* text = sub == "interval" ? kIntervalUsage : sub == "plan" ? kPlanUsage
                                                      : sub == "simulate" ? kSimulateUsage : nullptr;
  if (text == nullptr) return false;
  std::printf("usage: elastrain cost %s  (formulas: docs/cost.md)\n%s", sub.c_str(), text);
  return true;
}

// ---- interval -------------------------------------------------------------------------

int RunCostInterval(const std::vector<std::string>& argv) {
  auto parsed = CostArgs::Parse(argv, {"--checkpoint-seconds", "--mtti-seconds", "--restart-seconds", "--work-seconds"});
  if (!parsed.ok()) return Fail(parsed.status());
  const CostArgs& a = parsed.value();
  if (!a.passthrough().empty())
    return Fail(Status::InvalidArgument(fmt::format("unexpected argument '{}': interval takes only --flags",
                                                    a.passthrough()[0])));
  for (const char* f : {"--checkpoint-seconds", "--mtti-seconds"})
    if (!a.Has(f)) return Fail(Status::InvalidArgument(fmt::format("{}: missing (expected a number of seconds > 0)", f)));
  auto d = a.Number("--checkpoint-seconds", 0, 0, INFINITY, true);
  if (!d.ok()) return Fail(d.status());
  auto m = a.Number("--mtti-seconds", 0, 0, INFINITY, true);
  if (!m.ok()) return Fail(m.status());
  auto r = a.Number("--restart-seconds", 0, 0, INFINITY);
  if (!r.ok()) return Fail(r.status());
  auto w = a.Number("--work-seconds", 0, 0, INFINITY, true);
  if (!w.ok()) return Fail(w.status());
  const Status st = CheckIntervalInputs(*d, *m, *r);
  if (!st.ok()) return Fail(st);

  const double young = YoungInterval(*d, *m), daly = DalyInterval(*d, *m);
  std::string o = fmt::format("checkpoint {:g} s, MTTI {:g} s ({:.2f} h), restart {:g} s\n", *d, *m, *m / 3600, *r);
  o += fmt::format("Young  tau = sqrt(2 delta M)                 = {:10.1f} s = {:8.2f} min\n", young, young / 60);
  o += fmt::format("Daly   tau = sqrt(2 delta M)[1 + ...] - delta = {:10.1f} s = {:8.2f} min{}\n", daly, daly / 60,
                   *d >= 2 * *m ? "  (delta >= 2M: tau = M)" : "");
  if (a.Has("--work-seconds")) {
    for (auto [name, tau] : {std::pair<const char*, double>{"Young", young}, {"Daly", daly}}) {
      const double t = DalyExpectedWallTime(*w, tau, *d, *m, *r);
      o += fmt::format("expected wall time of {:g} s of work at {} tau: {:.1f} s = {:.2f} h (overhead {:.1f}%)\n", *w,
                       name, t, t / 3600, 100 * (t / *w - 1));
    }
  }
  std::fputs(o.c_str(), stdout);
  return 0;
}

// ---- plan -----------------------------------------------------------------------------

std::string Hours(double s) { return std::isfinite(s) ? fmt::format("{:.1f}", s / 3600) : "inf"; }

std::string PlanRow(int rank, const PlanCandidate& p) {
  return fmt::format("{:>4}  {:<18} {:<9} {:>5} {:>5} {:>7.1f} {:>7.2f} {:>7.1f} {:>7.1f} {:>7.0f} {:>8} {:>7.3f} "
                     "{:>8.2f} {:>10.0f}\n",
                     rank, p.offer.name, CapacityName(p.capacity), p.hosts, p.chips, p.bytes_per_chip / (1 << 30),
                     p.ideal_seconds / 3600, p.job_mtti_seconds / 3600, p.checkpoint_seconds,
                     p.interval_seconds, Hours(p.expected_seconds), p.goodput, p.usd_per_hour, p.cost_usd);
}

const char* kPlanHeader =
    "rank  offer              capacity  hosts chips GiB/chip ideal_h  mtti_h  ckpt_s   tau_s  expect_h goodput "
    "   usd/h   cost_usd\n";

// Why the best plan is best, in one or two sentences.
std::string WhyBest(const PlanCandidate& best, const std::vector<PlanCandidate>& ranked,
                    const std::vector<PlanCandidate>& all, const PlanRequest& req) {
  std::string o = fmt::format(
      "why: the cheapest of the {} plans that meet the {}{}; its {} hosts see an interruption every {:.1f} h, "
      "which with a {:.0f} s checkpoint every {:.0f} s and {:.0f} s of recovery keeps {:.1f}% of the time useful "
      "(goodput {:.3f})",
      ranked.size(), req.deadline_seconds > 0 ? fmt::format("{:g} h deadline", req.deadline_seconds / 3600) : "",
      req.budget_usd > 0 ? fmt::format("{}${:.0f} budget", req.deadline_seconds > 0 ? " and the " : "", req.budget_usd)
                         : (req.deadline_seconds > 0 ? "" : "(no deadline or budget) criteria"),
      best.hosts, best.job_mtti_seconds / 3600, best.checkpoint_seconds, best.interval_seconds, best.recovery_seconds,
      100 * best.goodput, best.goodput);
  // Fewer hosts of the same offer and capacity would cost less compute but miss the deadline.
  for (const PlanCandidate& p : all)
    if (p.offer.name == best.offer.name && p.capacity == best.capacity && p.hosts == best.hosts - 1 &&
        !p.meets_deadline)
      o += fmt::format("; {} hosts would take {} h", p.hosts, Hours(p.expected_seconds));
  return o + ".\n";
}

// The assumptions, the host range and constraints, and the offers that fit nowhere.
std::string PlanPreamble(const CostSetup& setup, const PlanReport& report) {
  const PlanRequest& req = setup.req;
  std::string o = DescribeSetup(setup);
  o += fmt::format("hosts {}..{} per offer; deadline {}; budget {}\n", req.min_hosts, req.max_hosts,
                   req.deadline_seconds > 0 ? fmt::format("{:g} h", req.deadline_seconds / 3600) : "none",
                   req.budget_usd > 0 ? fmt::format("${:.0f}", req.budget_usd) : "none");
  for (const std::string& r : report.rejected) o += "rejected " + r + "\n";
  return o;
}

// Why no plan is printed: nothing fits in memory, or nothing meets the deadline or budget.
Status NoPlanError(const PlanRequest& req, const PlanReport& report) {
  if (report.candidates.empty())
    return Status::InvalidArgument(fmt::format(
        "model_name={} fits no catalog offer at {}..{} hosts (see the rejected lines; try --workers MIN:MAX, "
        "remat_policy=full or a smaller per_device_batch_size)",
        req.model.name, req.min_hosts, req.max_hosts));
  double fastest = INFINITY, cheapest = INFINITY;
  for (const PlanCandidate& p : report.candidates) {
    fastest = std::min(fastest, p.expected_seconds);
    if (p.meets_deadline) cheapest = std::min(cheapest, p.cost_usd);
  }
  if (!std::isfinite(cheapest))
    return Status::InvalidArgument(
        fmt::format("no plan meets --deadline {:g}h: the fastest takes {} h (try more --workers or a higher MFU)",
                    req.deadline_seconds / 3600, Hours(fastest)));
  return Status::InvalidArgument(fmt::format("no plan meets --budget {:.0f}: the cheapest{} costs ${:.0f}",
                                             req.budget_usd, req.deadline_seconds > 0 ? " within the deadline" : "",
                                             cheapest));
}

// When the best plan is not spot although spot fits: spot's fastest plan misses the deadline.
std::string SpotFallbackNote(const PlanCandidate& best, const PlanReport& report) {
  if (best.capacity == Capacity::kSpot) return "";
  bool spot_fits = false, spot_meets = false;
  double spot_fastest = INFINITY;
  for (const PlanCandidate& p : report.candidates)
    if (p.capacity == Capacity::kSpot) {
      spot_fits = true;
      spot_fastest = std::min(spot_fastest, p.expected_seconds);
      spot_meets |= p.meets_deadline;
    }
  if (!spot_fits || spot_meets) return "";
  return fmt::format("spot cannot meet the deadline (its fastest plan takes {} h), so this plan falls back to {} "
                     "capacity.\n",
                     Hours(spot_fastest), CapacityName(best.capacity));
}

// The best plan: what it is, why, and its prices.
std::string BestPlanText(const std::vector<PlanCandidate>& ranked, const PlanReport& report, const PlanRequest& req) {
  const PlanCandidate& best = ranked[0];
  std::string o =
      fmt::format("\nbest: {} {} x {} hosts ({} chips of {}): ${:.0f} expected, {} h (ideal {} h, goodput {:.3f})\n",
                  best.offer.name, CapacityName(best.capacity), best.hosts, best.chips, best.offer.accelerator,
                  best.cost_usd, Hours(best.expected_seconds), Hours(best.ideal_seconds), best.goodput);
  o += WhyBest(best, ranked, report.candidates, req);
  if (req.memory_snapshot_replicas > 0 && best.snapshot_period_steps == 0)
    o += "ram tier: off (memory_snapshot_period=auto: its best period is not under half the disk interval, so a "
         "copy costs more than the work it saves)\n";
  else if (req.memory_snapshot_replicas > 0)
    o += fmt::format(
        "ram tier: a copy every {} step(s){}; covers {:.2f} of interruptions (one every {:.1f} h goes to disk, so tau is Daly at that MTTI); a "
        "covered one costs {:.0f} s of recovery from peers + ~{:.1f} s of redone work (half a {:.1f} s snapshot "
        "period); host RAM {:.2f} GiB per rank, {:.1f} GiB per host\n",
        best.snapshot_period_steps, req.memory_snapshot_period_auto ? " (chosen: memory_snapshot_period=auto)" : "",
        best.ram_tier_coverage, best.uncovered_mtti_seconds / 3600, best.peer_recovery_seconds,
        best.snapshot_period_seconds / 2, best.snapshot_period_seconds, best.ram_tier_bytes_per_chip / (1 << 30),
        best.ram_tier_bytes_per_chip * best.offer.chips_per_host / (1 << 30));
  o += SpotFallbackNote(best, report);
  o += fmt::format("price: {} ${:.3f} spot, ${:.3f} on demand per chip-hour; {}: ${:.2f}/h for {} chips ({}, {}, {})\n",
                   best.offer.name, best.offer.spot_usd_per_chip_hour, best.offer.on_demand_usd_per_chip_hour,
                   best.capacity == Capacity::kMix
                       ? fmt::format("mix of {} on-demand and {} spot hosts", best.on_demand_hosts,
                                     best.hosts - best.on_demand_hosts)
                       : std::string(CapacityName(best.capacity)),
                   best.usd_per_hour, best.chips, best.offer.region, best.offer.source, best.offer.price_date);
  return o;
}

// The `top` cheapest plans that meet the constraints.
std::string RankedTable(const std::vector<PlanCandidate>& ranked, int64_t top) {
  std::string o = fmt::format("\n{}", kPlanHeader);
  for (size_t i = 0; i < ranked.size() && i < static_cast<size_t>(top); ++i) o += PlanRow(i + 1, ranked[i]);
  if (ranked.size() > static_cast<size_t>(top))
    o += fmt::format("  ... {} more plans meet the constraints (--top K shows more)\n", ranked.size() - top);
  return o;
}

// The cheapest plan of each offer and capacity, or why it has none.
std::string CheapestPerOfferTable(const std::vector<AcceleratorOffer>& offers,
                                  const std::vector<PlanCandidate>& ranked, const PlanReport& report) {
  std::string o = "\nthe cheapest plan of each offer and capacity (rank among all plans):\n" + std::string(kPlanHeader);
  for (const AcceleratorOffer& offer : offers)
    for (Capacity c : {Capacity::kSpot, Capacity::kOnDemand, Capacity::kMix}) {
      size_t i = 0;
      while (i < ranked.size() && !(ranked[i].offer.name == offer.name && ranked[i].capacity == c)) ++i;
      if (i < ranked.size()) {
        o += PlanRow(i + 1, ranked[i]);
        continue;
      }
      double fastest = INFINITY;
      bool fits = false;
      for (const PlanCandidate& p : report.candidates)
        if (p.offer.name == offer.name && p.capacity == c) fits = true, fastest = std::min(fastest, p.expected_seconds);
      o += fmt::format("   -  {:<18} {:<9} {}\n", offer.name, CapacityName(c),
                       !fits ? "does not fit in memory"
                             : fmt::format("none meets the constraints (fastest {} h)", Hours(fastest)));
    }
  return o;
}

int RunCostPlan(const std::vector<std::string>& argv) {
  std::set<std::string> flags = CostSetupFlags();
  flags.insert("--top");
  auto parsed = CostArgs::Parse(argv, flags);
  if (!parsed.ok()) return Fail(parsed.status());
  CostArgs& a = parsed.value();
  auto top = a.Integer("--top", kDefaultPlansShown, 1, 100000);
  if (!top.ok()) return Fail(top.status());
  auto setup = BuildCostSetup(a);
  if (!setup.ok()) return Fail(setup.status());
  const PlanRequest& req = setup->req;
  const PlanReport report = EnumeratePlans(req, setup->offers);
  const std::vector<PlanCandidate> ranked = RankPlans(report.candidates);

  std::fputs(PlanPreamble(setup.value(), report).c_str(), stdout);
  if (ranked.empty()) return Fail(NoPlanError(req, report));
  std::string o = BestPlanText(ranked, report, req);
  o += RankedTable(ranked, *top);
  o += CheapestPerOfferTable(setup->offers, ranked, report);
  std::fputs(o.c_str(), stdout);
  return 0;
}

}  // namespace

int RunCostCommand(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    PrintCostUsage();
    return args.empty() ? 2 : 0;
  }
  for (const std::string& a : args)
    if (a == "-h" || a == "--help") {
      if (!PrintSubcommandUsage(args[0])) PrintCostUsage();
      return 0;
    }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "interval") return RunCostInterval(rest);
  if (args[0] == "plan") return RunCostPlan(rest);
  if (args[0] == "simulate") return RunCostSimulate(rest);
  return Fail(Status::InvalidArgument(
      fmt::format("unknown subcommand '{}': expected interval, plan or simulate", args[0])));
}

}  // namespace elastrain
