#include "cli/cost_setup.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "model/flops.h"

namespace elastrain {

namespace {

std::string LossSizesText(const std::vector<LossSize>& sizes) {
  std::string s;
  for (const LossSize& l : sizes) s += fmt::format("{}{}:{:g}", s.empty() ? "" : ",", l.hosts, l.probability);
  return s;
}

Status ReadPreemptionFlags(const CostArgs& a, const std::string& prefix, PreemptionModel* m) {
  ELASTRAIN_ASSIGN_OR_RETURN(m->host_mtti_seconds,
                             a.Seconds("--" + prefix + "-host-mtti", m->host_mtti_seconds, 3600));
  ELASTRAIN_ASSIGN_OR_RETURN(m->replacement_seconds,
                             a.Number("--" + prefix + "-replacement-seconds", m->replacement_seconds, 0, INFINITY));
  const std::string flag = "--" + prefix + "-loss-sizes";
  if (a.Has(flag)) {
    ELASTRAIN_ASSIGN_OR_RETURN(m->loss_sizes, ParseLossSizes(a.String(flag, ""), flag));
  }
  return Status::OK();
}

// tokens=N, taken out of the config overrides.
Result<double> TakeTokens(CostArgs& a) {
  const std::string tokens = a.TakeKey("tokens");
  double v = 0;
  const auto [p, ec] = std::from_chars(tokens.data(), tokens.data() + tokens.size(), v);
  if (tokens.empty() || ec != std::errc() || p != tokens.data() + tokens.size() || !(v >= 1) || !std::isfinite(v))
    return Status::InvalidArgument(fmt::format(
        "tokens={}: expected the number of training tokens, >= 1 (e.g. tokens=1e11)", tokens.empty() ? "" : tokens));
  return v;
}

// --mfu X (or the planning default) or the median of --metrics FILE; and the note saying which.
Status ReadMfu(const CostArgs& a, CostSetup* s) {
  PlanRequest& r = s->req;
  if (a.Has("--metrics") && a.Has("--mfu"))
    return Status::InvalidArgument("--mfu and --metrics: expected one of them, not both");
  if (a.Has("--metrics")) {
    const std::string path = a.String("--metrics", "");
    ELASTRAIN_ASSIGN_OR_RETURN(r.mfu, MeasuredMfu(path));
    s->mfu_note = fmt::format("measured MFU {:.2f} from {} (median of its mfu fields)", r.mfu, path);
  } else {
    ELASTRAIN_ASSIGN_OR_RETURN(r.mfu, a.Number("--mfu", kDefaultMfu, 0, 1, /*lo_open=*/true));
    s->mfu_note = fmt::format("{} MFU {:.2f}{}", a.Has("--mfu") ? "given" : "assumed", r.mfu,
                              a.Has("--mfu") ? "" : " (--mfu X or --metrics RUN/metrics.jsonl to change)");
  }
  return Status::OK();
}

// --workers N or MIN:MAX.
Status ReadWorkers(const CostArgs& a, PlanRequest* r) {
  if (!a.Has("--workers")) return Status::OK();
  const std::string w = a.String("--workers", "");
  int lo = 0, hi = 0;
  const size_t colon = w.find(':');
  bool ok = false;
  if (colon != std::string::npos) {
    auto [p1, e1] = std::from_chars(w.data(), w.data() + colon, lo);
    auto [p2, e2] = std::from_chars(w.data() + colon + 1, w.data() + w.size(), hi);
    ok = e1 == std::errc() && p1 == w.data() + colon && e2 == std::errc() && p2 == w.data() + w.size();
  } else {
    auto [p, e] = std::from_chars(w.data(), w.data() + w.size(), lo);
    hi = lo;
    ok = e == std::errc() && p == w.data() + w.size();
  }
  if (!ok || lo < 1 || hi < lo || hi > 100000)
    return Status::InvalidArgument(fmt::format(
        "--workers={}: expected N or MIN:MAX hosts with 1 <= MIN <= MAX <= 100000", w));
  r->min_hosts = lo, r->max_hosts = hi;
  return Status::OK();
}

// --deadline, --budget, --workers and --mix-on-demand-fraction: what plans may be.
Status ReadDeadlineAndHosts(const CostArgs& a, PlanRequest* r) {
  ELASTRAIN_ASSIGN_OR_RETURN(r->deadline_seconds, a.Seconds("--deadline", 0, 3600));
  ELASTRAIN_ASSIGN_OR_RETURN(r->budget_usd, a.Number("--budget", 0, 0, INFINITY, /*lo_open=*/true));
  ELASTRAIN_RETURN_IF_ERROR(ReadWorkers(a, r));
  ELASTRAIN_ASSIGN_OR_RETURN(r->mix_on_demand_fraction,
                             a.Number("--mix-on-demand-fraction", kDefaultMixOnDemandFraction, 0, 1));
  return Status::OK();
}

// Checkpoint bandwidth, detection and restart time, and each capacity's failure process.
Status ReadRecoveryFlags(const CostArgs& a, PlanRequest* r) {
  ELASTRAIN_ASSIGN_OR_RETURN(double gbps, a.Number("--checkpoint-gbps-per-host",
                                                   kDefaultCheckpointBytesPerSecondPerHost / 1e9, 0, INFINITY, true));
  r->checkpoint_bytes_per_second_per_host = gbps * 1e9;
  ELASTRAIN_ASSIGN_OR_RETURN(r->detection_seconds,
                             a.Number("--detection-seconds", kDefaultDetectionSeconds, 0, INFINITY));
  ELASTRAIN_ASSIGN_OR_RETURN(r->restart_seconds, a.Number("--restart-seconds", kDefaultRestartSeconds, 0, INFINITY));
  ELASTRAIN_RETURN_IF_ERROR(ReadPreemptionFlags(a, "spot", &r->spot));
  ELASTRAIN_RETURN_IF_ERROR(ReadPreemptionFlags(a, "on-demand", &r->on_demand));
  return Status::OK();
}

// --memory-snapshot-replicas N (0: off) and, only with it, the RAM tier's other flags.
Status ReadRamTierFlags(const CostArgs& a, PlanRequest* r) {
  ELASTRAIN_ASSIGN_OR_RETURN(int64_t replicas, a.Integer("--memory-snapshot-replicas", 0, 0, 8));
  r->memory_snapshot_replicas = static_cast<int>(replicas);
  if (replicas == 0) {
    for (const char* f : {"--memory-snapshot-period", "--ram-tier-coverage", "--peer-restore-gbps-per-host",
                          "--snapshot-copy-seconds"})
      if (a.Has(f))
        return Status::InvalidArgument(fmt::format(
            "{}={}: the RAM tier is off; expected --memory-snapshot-replicas N (1 to 8) with it", f, a.String(f, "")));
    return Status::OK();
  }
  r->memory_snapshot_period_auto = a.String("--memory-snapshot-period", "") == "auto";
  if (!r->memory_snapshot_period_auto) {
    auto period = a.Integer("--memory-snapshot-period", 1, 1, int64_t{1} << 40);
    if (!period.ok()) return Status::InvalidArgument(period.status().message() + ", or auto (chosen per plan)");
    r->memory_snapshot_period = period.value();
  }
  ELASTRAIN_ASSIGN_OR_RETURN(r->snapshot_copy_seconds, a.Number("--snapshot-copy-seconds", 0, 0, INFINITY));
  ELASTRAIN_ASSIGN_OR_RETURN(r->ram_tier_coverage,
                             a.Number("--ram-tier-coverage", 1 - kRamTierUncoveredFraction, 0, 1));
  if (r->ram_tier_coverage >= 1)
    return Status::InvalidArgument(fmt::format(
        "--ram-tier-coverage={}: expected a number in [0, 1) (a whole-job restart is never covered)",
        a.String("--ram-tier-coverage", "")));
  ELASTRAIN_ASSIGN_OR_RETURN(double gbps, a.Number("--peer-restore-gbps-per-host",
                                                   kDefaultPeerRestoreBytesPerSecondPerHost / 1e9, 0, INFINITY, true));
  r->peer_restore_bytes_per_second_per_host = gbps * 1e9;
  return Status::OK();
}

// --catalog PATH, or the catalog compiled into the binary.
Status LoadOffers(const CostArgs& a, CostSetup* s) {
  if (a.Has("--catalog")) {
    s->catalog_origin = a.String("--catalog", "");
    ELASTRAIN_ASSIGN_OR_RETURN(s->offers, LoadCatalog(s->catalog_origin));
  } else {
    s->catalog_origin = "the built-in configs/catalog/*.csv";
    ELASTRAIN_ASSIGN_OR_RETURN(s->offers, EmbeddedCatalog());
  }
  return Status::OK();
}

}  // namespace

const std::set<std::string>& CostSetupFlags() {
  static const std::set<std::string> f = {
      "--deadline", "--budget", "--mfu", "--metrics", "--workers", "--catalog", "--mix-on-demand-fraction",
      "--checkpoint-gbps-per-host", "--detection-seconds", "--restart-seconds", "--spot-host-mtti",
      "--spot-replacement-seconds", "--spot-loss-sizes", "--on-demand-host-mtti", "--on-demand-replacement-seconds",
      "--on-demand-loss-sizes", "--memory-snapshot-replicas", "--memory-snapshot-period", "--snapshot-copy-seconds", "--ram-tier-coverage",
      "--peer-restore-gbps-per-host"};
  return f;
}

Result<double> MeasuredMfu(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(fmt::format("--metrics {}: no such file", path));
  std::vector<double> mfus;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("mfu") && j["mfu"].is_number()) {
      const double v = j["mfu"].get<double>();
      if (v > 0 && v <= 1) mfus.push_back(v);
    }
  }
  if (mfus.empty())
    return Status::InvalidArgument(
        fmt::format("--metrics {}: no line has an \"mfu\" field in (0, 1] (expected a run's metrics.jsonl)", path));
  std::sort(mfus.begin(), mfus.end());
  return mfus[mfus.size() / 2];
}

Result<CostSetup> BuildCostSetup(CostArgs& a) {
  CostSetup s;
  PlanRequest& r = s.req;
  ELASTRAIN_ASSIGN_OR_RETURN(r.tokens, TakeTokens(a));
  // The config loader's defaults suit training on this CPU; a cost plan is about real
  // accelerators, so keys not given here take planning defaults (docs/cost.md).
  const bool explicit_len = a.HasKey("max_target_length");
  const bool explicit_batch = a.HasKey("per_device_batch_size");
  const bool explicit_remat = a.HasKey("remat_policy");
  std::vector<std::string> overrides = a.passthrough();
  if (!explicit_batch) overrides.push_back("per_device_batch_size=1");
  if (!explicit_remat) overrides.push_back("remat_policy=full");
  ELASTRAIN_ASSIGN_OR_RETURN(TrainConfig cfg, LoadConfigFromArgs(overrides));
  r.model = cfg.model;
  r.seq_len = explicit_len ? cfg.max_target_length : cfg.model.max_seq_len;
  r.micro_batch = cfg.per_device_batch_size;
  r.remat_full = cfg.remat_policy == RematPolicy::kFull;
  s.shape_note = fmt::format("seq_len {} ({}), per_device_batch_size {} ({}), remat_policy {} ({})", r.seq_len,
                             explicit_len ? "max_target_length" : "the preset's context; max_target_length=N to change",
                             r.micro_batch, explicit_batch ? "given" : "planning default", RematPolicyName(cfg.remat_policy),
                             explicit_remat ? "given" : "planning default");

  ELASTRAIN_RETURN_IF_ERROR(ReadMfu(a, &s));
  ELASTRAIN_RETURN_IF_ERROR(ReadDeadlineAndHosts(a, &r));
  ELASTRAIN_RETURN_IF_ERROR(ReadRecoveryFlags(a, &r));
  ELASTRAIN_RETURN_IF_ERROR(ReadRamTierFlags(a, &r));
  ELASTRAIN_RETURN_IF_ERROR(LoadOffers(a, &s));
  return s;
}

std::string DescribeSetup(const CostSetup& s) {
  const PlanRequest& r = s.req;
  const MemoryEstimate mem = EstimateTrainingMemory(r.model, r.micro_batch, r.seq_len, r.remat_full);
  const double n = static_cast<double>(r.model.NumParams());
  std::string o;
  o += fmt::format("model {}: {:.3f}B parameters, {:.3g} FLOPs/token (6 x matmul params + attention, at {}), "
                   "{:.3g} tokens\n",
                   r.model.name, n / 1e9, TrainingFlopsPerToken(r.model, r.seq_len), r.seq_len, r.tokens);
  o += fmt::format("  {}\n", s.shape_note);
  o += fmt::format("{}\n", s.mfu_note);
  o += fmt::format("memory: {} of fp32 parameters + gradients + AdamW m, v sharded over all chips (FSDP), "
                   "+ {} activations per chip\n",
                   FormatBytes(mem.param_bytes + mem.grad_bytes + mem.optimizer_bytes), FormatBytes(mem.activation_bytes));
  if (r.memory_snapshot_replicas > 0)
    o += fmt::format("ram tier: {} replica(s) of each shard {}, a copy adding {:g} s to its step: (1 staging + 2 x "
                     "{} buffers) x 12 B x params = {} of host RAM in all, / chips per rank; covers {:g} of "
                     "interruptions (at most those that spare a host), restores from peers at {:g} GB/s per host\n",
                     r.memory_snapshot_replicas,
                     r.memory_snapshot_period_auto
                         ? std::string("at a period chosen per plan, or off (memory_snapshot_period=auto: Young's "
                                       "interval for the copy, kept when under half the disk interval)")
                         : fmt::format("every {} step(s)", r.memory_snapshot_period),
                     r.snapshot_copy_seconds, r.memory_snapshot_replicas,
                     FormatBytes((1 + 2 * r.memory_snapshot_replicas) * (mem.param_bytes + mem.optimizer_bytes)),
                     r.ram_tier_coverage, r.peer_restore_bytes_per_second_per_host / 1e9);
  o += fmt::format("checkpoint: {:.1f} GB (parameters + AdamW m, v) at {:g} GB/s per host, restored at the same rate\n",
                   (mem.param_bytes + mem.optimizer_bytes) / 1e9, r.checkpoint_bytes_per_second_per_host / 1e9);
  o += fmt::format("failures: spot host MTTI {:.1f} h, hosts lost per event {}, replacement {:g} s; on-demand host "
                   "MTTI {:.0f} h, hosts lost {}, replacement {:g} s\n",
                   r.spot.host_mtti_seconds / 3600, LossSizesText(r.spot.loss_sizes), r.spot.replacement_seconds,
                   r.on_demand.host_mtti_seconds / 3600, LossSizesText(r.on_demand.loss_sizes),
                   r.on_demand.replacement_seconds);
  o += fmt::format("recovery: detection {:g} s + restart {:g} s + restore + replacement wait; mix = {:g}% of hosts "
                   "on demand (rounded up)\n",
                   r.detection_seconds, r.restart_seconds, 100 * r.mix_on_demand_fraction);
  o += fmt::format("catalog: {} offers from {}\n", s.offers.size(), s.catalog_origin);
  return o;
}

}  // namespace elastrain
