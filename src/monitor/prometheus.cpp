#include "monitor/prometheus.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "wire/events.h"
#include "wire/job_state.h"
#include "common/json.h"

namespace elastrain {

namespace {

class Exposition {
 public:
  void Family(const std::string& name, const char* type, const std::string& help) {
    out_ += fmt::format("# HELP elastrain_{} {}\n# TYPE elastrain_{} {}\n", name, help, name, type);
  }
  void Sample(const std::string& name, double v, const std::string& labels = "") {
    out_ += "elastrain_" + name + (labels.empty() ? "" : "{" + labels + "}") + " " + Value(v) + "\n";
  }
  void Gauge(const std::string& name, const std::string& help, double v) {
    Family(name, "gauge", help);
    Sample(name, v);
  }
  void Counter(const std::string& name, const std::string& help, double v) {
    Family(name, "counter", help);
    Sample(name, v);
  }
  void Histogram(const std::string& name, const std::string& help, const std::vector<double>& bounds,
                 const std::vector<double>& values) {
    Family(name, "histogram", help);
    double sum = 0;
    for (double v : values) sum += v;
    for (double b : bounds) {
      size_t n = 0;
      for (double v : values) n += v <= b ? 1 : 0;
      Sample(name + "_bucket", static_cast<double>(n), fmt::format("le=\"{}\"", Value(b)));
    }
    Sample(name + "_bucket", static_cast<double>(values.size()), "le=\"+Inf\"");
    Sample(name + "_sum", sum);
    Sample(name + "_count", static_cast<double>(values.size()));
  }
  std::string Take() { return std::move(out_); }

 private:
  static std::string Value(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    return fmt::format("{}", v);
  }
  std::string out_;
};

// Per rank of the current generation (labels rank and host), and per host with a health
// record. Read leniently: a rank entry of another shape is skipped.
void RankGauges(Exposition& x, const nlohmann::json& status, bool has_job) {
  const nlohmann::json empty = nlohmann::json::array();
  const nlohmann::json& ranks = has_job && status.contains("ranks") && status["ranks"].is_array() ? status["ranks"] : empty;
  struct Family {
    const char* name;
    const char* help;
    double (*value)(const nlohmann::json& r);
  };
  static const Family kFamilies[] = {
      {"rank_step", "the newest step the rank reported",
       [](const nlohmann::json& r) { return LenientNumber(r, "step", -1); }},
      {"rank_compute_seconds", "the rank's compute time per step (forward, backward, update, its own I/O), a mean "
                               "over its last timed steps",
       [](const nlohmann::json& r) { return LenientNumber(r, "compute_seconds"); }},
      {"rank_wait_seconds", "the rank's time per step blocked in collectives (waiting for its peers)",
       [](const nlohmann::json& r) { return LenientNumber(r, "wait_seconds"); }},
      {"rank_timed_steps", "how many steps the rank's compute and wait means cover (0: not timed yet)",
       [](const nlohmann::json& r) { return LenientNumber(r, "timed_steps"); }},
      {"rank_collective_seq", "the collective the rank entered last in its generation (-1: none yet)",
       [](const nlohmann::json& r) { return LenientNumber(r, "collective_seq", -1); }},
      {"rank_in_collective", "1 while the rank is inside its last collective",
       [](const nlohmann::json& r) { return r.contains("in_collective") && r["in_collective"] == true ? 1.0 : 0.0; }},
      {"rank_straggler", "1 while the controller holds the rank for a straggler",
       [](const nlohmann::json& r) { return r.contains("straggler") && r["straggler"] == true ? 1.0 : 0.0; }},
  };
  for (const Family& f : kFamilies) {
    x.Family(f.name, "gauge", f.help);
    for (const nlohmann::json& r : ranks) {
      if (!r.is_object()) continue;
      x.Sample(f.name, f.value(r),
               fmt::format("rank=\"{}\",host=\"{}\"", LenientInteger(r, "rank", -1),
                           PrometheusLabel(LenientString(r, "host"))));
    }
  }
  const nlohmann::json& hosts = has_job && status.contains("hosts") && status["hosts"].is_array() ? status["hosts"] : empty;
  x.Family("host_healthy", "gauge", "1: the host's last health check passed and has not expired; 0: it failed, expired "
                                    "or does not load (hosts with a health record only)");
  for (const nlohmann::json& h : hosts)
    if (h.is_object() && LenientString(h, "health", "unchecked") != "unchecked")
      x.Sample("host_healthy", LenientString(h, "health") == "healthy" ? 1 : 0,
               fmt::format("host=\"{}\"", PrometheusLabel(LenientString(h, "host"))));
  x.Family("host_excluded_until_seconds", "gauge", "wall time until which a host is excluded for a gray failure");
  for (const nlohmann::json& h : hosts)
    if (h.is_object() && LenientNumber(h, "excluded_until") > 0)
      x.Sample("host_excluded_until_seconds", LenientNumber(h, "excluded_until"),
               fmt::format("host=\"{}\"", PrometheusLabel(LenientString(h, "host"))));
}

}  // namespace

std::string PrometheusLabel(const std::string& v) {
  std::string s;
  for (char c : v) {
    if (c == '\\') s += "\\\\";
    else if (c == '"') s += "\\\"";
    else if (c == '\n') s += "\\n";
    else s += c;
  }
  return s;
}

std::string RenderPrometheus(const nlohmann::json& status, const RunSnapshot& run) {
  Exposition x;
  const bool has_job = status.is_object() && status.contains("job");
  // Typed reads: the status may come from store records; a field of another type is "".
  const std::string state = !has_job ? "" : status.contains("state") ? LenientString(status, "state") : "PENDING";
  x.Family("job_info", "gauge", "the job this controller runs (always 1; its labels name it)");
  if (has_job)
    x.Sample("job_info", 1,
             fmt::format("job_id=\"{}\",run_dir=\"{}\",num_workers=\"{}\"", PrometheusLabel(LenientString(status, "job")),
                         PrometheusLabel(LenientString(status, "run_dir")), PrometheusLabel(LenientString(status, "num_workers"))));
  x.Family("job_state", "gauge", "1 for the job's current state, 0 for the others");
  for (JobState s : {JobState::kPending, JobState::kRunning, JobState::kRecovering, JobState::kResizing,
                     JobState::kWaitingForResources, JobState::kSucceeded, JobState::kFailed, JobState::kStopped}) {
    const std::string name = JobStateName(s);
    x.Sample("job_state", has_job && name == state ? 1 : 0, fmt::format("state=\"{}\"", name));
  }
  const auto st = [&](const char* k) { return has_job ? LenientNumber(status, k) : 0.0; };
  x.Gauge("step", "the newest completed training step", st("step"));
  x.Gauge("target_steps", "the steps the job trains for", st("steps"));
  x.Gauge("generation", "the current generation (a new one starts at every membership change)", st("generation"));
  x.Gauge("world_size", "workers in the current generation", st("world"));
  x.Gauge("max_failures", "the failure budget (-1: unlimited)", st("max_failures"));
  x.Counter("failures_total", "failures counted against max_failures", st("failures"));
  x.Counter("restarts_total", "generations started after the first (failures and resizes)", st("restarts"));
  const double ckpt = has_job ? LenientNumber(status, "latest_checkpoint_step", -1) : -1;
  x.Gauge("checkpoint_latest_step", "the newest committed checkpoint's step (-1: none yet)", ckpt);
  x.Gauge("checkpoint_age_steps", "steps trained since the newest committed checkpoint",
          st("step") - std::max(0.0, ckpt));
  // checkpoint_period=auto: the period the chief chose last.
  double period = st("checkpoint_period");
  for (auto it = run.events.rbegin(); it != run.events.rend(); ++it) {
    const auto r = DecodeEvent(*it);
    if (const auto* e = r.ok() ? EventAs<CheckpointPeriodChangedEvent>(r.value()) : nullptr) {
      period = static_cast<double>(e->to);
      break;
    }
  }
  x.Gauge("checkpoint_period_steps", "checkpoint_period (with auto: the current choice)", period);
  // memory_snapshot_period=auto: the RAM tier's period the chief chose last (0: off).
  double snapshot = NAN;
  for (auto it = run.events.rbegin(); it != run.events.rend(); ++it) {
    const auto r = DecodeEvent(*it);
    if (const auto* e = r.ok() ? EventAs<MemorySnapshotPeriodChangedEvent>(r.value()) : nullptr) {
      snapshot = static_cast<double>(e->to);
      break;
    }
  }
  if (!std::isnan(snapshot))
    x.Gauge("memory_snapshot_period_steps", "memory_snapshot_period=auto: the RAM tier's current period (0: off)",
            snapshot);

  // The newest training figures, from metrics.jsonl.
  double loss = NAN, eval = NAN, tps = NAN, mfu = NAN, last_step_time = 0;
  for (auto it = run.metrics.rbegin(); it != run.metrics.rend(); ++it) {
    if (std::isnan(loss) && it->contains("loss")) {
      loss = LenientNumber(*it, "loss");
      tps = LenientNumber(*it, "tokens_per_sec");
      mfu = LenientNumber(*it, "mfu");
      last_step_time = LenientNumber(*it, "wall_time");
    }
    if (std::isnan(eval) && it->contains("eval_loss")) eval = LenientNumber(*it, "eval_loss");
    if (!std::isnan(loss) && !std::isnan(eval)) break;
  }
  x.Gauge("loss", "training loss of the newest logged step", loss);
  x.Gauge("eval_loss", "the newest evaluation loss", eval);
  x.Gauge("tokens_per_second", "training throughput of the newest logged step", tps);
  x.Gauge("mfu", "model FLOPs utilisation of the newest logged step (0..1)", mfu);
  x.Gauge("last_step_timestamp_seconds", "wall time when the newest logged step completed", last_step_time);

  std::vector<double> saves, stalls;
  for (const nlohmann::json& line : run.events) {
    const auto r = DecodeEvent(line);
    if (const auto* e = r.ok() ? EventAs<CheckpointSavedEvent>(r.value()) : nullptr) {
      saves.push_back(e->write_seconds);
      stalls.push_back(e->stall_seconds);
    }
  }
  const std::vector<double> fast = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  x.Histogram("checkpoint_save_seconds", "time to write and commit a checkpoint", fast, saves);
  x.Histogram("checkpoint_stall_seconds", "training blocked by a checkpoint save", fast, stalls);
  x.Histogram("recovery_seconds", "end of a generation to the first step of the next, less waiting",
              {0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600}, run.goodput.recoveries);

  RankGauges(x, status, has_job);

  const GoodputBreakdown& g = run.goodput;
  x.Gauge("wall_seconds", "the job's wall time so far", g.wall());
  x.Family("time_seconds_total", "counter", "the job's wall time by goodput category (they sum to wall_seconds)");
  for (int i = 0; i < kNumTimeCategories; ++i)
    x.Sample("time_seconds_total", g.seconds[i],
             fmt::format("category=\"{}\"", TimeCategoryName(static_cast<TimeCategory>(i))));
  // A launched program that reports no steps: its productive time is unknown (NaN), not 0.
  const bool launched = has_job && status.contains("launched") && status["launched"].is_boolean() &&
                        status["launched"].get<bool>();
  const bool steps_known = !launched || std::any_of(run.metrics.begin(), run.metrics.end(),
                                                    [](const nlohmann::json& m) { return m.contains("step"); });
  x.Gauge("goodput_ratio", "productive training time / wall time (NaN: a launched program that reports no steps)",
          steps_known ? g.goodput() : NAN);
  x.Counter("redone_steps_total", "steps trained again after a failure", static_cast<double>(g.redone_steps));
  x.Counter("worker_seconds_total", "worker-seconds of RUNNING generations", g.worker_seconds);
  const double price = st("cost_per_worker_hour");
  x.Gauge("cost_per_worker_hour", "cost_per_worker_hour (USD)", price);
  x.Gauge("estimated_cost_usd", "worker-seconds x cost_per_worker_hour", g.worker_seconds / 3600.0 * price);
  return x.Take();
}

}  // namespace elastrain
