#include "cost/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

namespace elastrain {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Phase { kWork, kCheckpoint, kDetect, kWait, kRestart };

// The state of one trial. Hosts are in one of three places: `world` (training),
// `ready` (arrived, joins at the next restart or checkpoint), or on their way back
// (`arrivals`, times). Billing counts world + ready.
struct TrialState {
  double t = 0;
  double work = 0, saved = 0;  // work done and work in the last checkpoint, full-world seconds
  double phase_left = 0;       // seconds until the phase ends (at the current speed for kWork)
  double segment_done = 0;     // compute seconds since the last checkpoint or restart
  Phase phase = Phase::kWork;
  int world = 0, ready = 0;
  std::priority_queue<double, std::vector<double>, std::greater<double>> arrivals;
  double cost = 0;
  int interruptions = 0;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * (v.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  const double f = pos - i;
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

}  // namespace

SimTrial SimulateTrial(const SimJob& job, const PreemptionModel& failures, const std::vector<PreemptionEvent>& trace,
                       std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  auto exponential = [&](double mean) { return -mean * std::log1p(-uniform(rng)); };
  TrialState s;
  s.world = job.hosts;
  size_t next_trace = 0;
  const double usd_per_host_second = job.usd_per_host_hour / 3600.0;
  const double give_up = kMaxSimulatedFactor * std::max(job.work_seconds, 1.0);

  auto start_work = [&] {
    s.phase = Phase::kWork;
    s.segment_done = 0;
  };
  auto enter = [&](Phase p, double seconds) {
    s.phase = p;
    s.phase_left = seconds;
  };
  auto after_detect = [&] {
    s.world += s.ready;
    s.ready = 0;
    if (s.world >= job.min_hosts && s.world > 0) enter(Phase::kRestart, job.restart_seconds);
    else enter(Phase::kWait, kInf);
  };

  while (true) {
    const double speed = static_cast<double>(s.world) / job.hosts;  // work per second while computing
    double phase_end = s.phase_left;
    bool finishes_work = false;  // kWork ends with the last of the work (not at tau)
    if (s.phase == Phase::kWork) {
      const double to_checkpoint = job.interval_seconds - s.segment_done;
      const double to_finish = (job.work_seconds - s.work) / speed;
      finishes_work = to_finish <= to_checkpoint;
      phase_end = std::min(to_checkpoint, to_finish);
    }
    // The next interruption: memoryless, so drawn afresh at every event.
    double to_failure = kInf;
    if (!trace.empty()) {
      if (next_trace < trace.size()) to_failure = std::max(trace[next_trace].time_seconds - s.t, 0.0);
    } else if (s.world > 0) {
      to_failure = exponential(failures.host_mtti_seconds / s.world);
    }
    const double to_arrival = s.arrivals.empty() ? kInf : s.arrivals.top() - s.t;
    const double dt = std::min({phase_end, to_failure, to_arrival});
    if (s.t + dt > give_up || !std::isfinite(dt)) {
      s.cost += (s.world + s.ready) * usd_per_host_second * (give_up - s.t);
      return {give_up, s.cost, s.interruptions, false};
    }
    s.t += dt;
    s.cost += (s.world + s.ready) * usd_per_host_second * dt;
    if (s.phase == Phase::kWork) {
      s.work = std::min(job.work_seconds, s.work + speed * dt);
      s.segment_done += dt;
    } else {
      s.phase_left -= dt;
    }

    if (dt == to_failure) {
      int lost = !trace.empty() ? trace[next_trace++].hosts_lost : HostsLostFor(failures.loss_sizes, uniform(rng));
      lost = std::min(lost, s.world);
      if (lost == 0) continue;  // a trace event with nothing left to take
      ++s.interruptions;
      s.world -= lost;
      if (failures.replacement_seconds <= 0) s.world += lost;  // replaced at once
      else
        for (int i = 0; i < lost; ++i) s.arrivals.push(s.t + exponential(failures.replacement_seconds));
      s.work = s.saved;  // everything since the last checkpoint is redone
      enter(Phase::kDetect, job.detection_seconds);
      continue;
    }
    if (dt == to_arrival) {
      s.arrivals.pop();
      if (s.phase == Phase::kWait) {
        ++s.world;
        if (s.world >= job.min_hosts) enter(Phase::kRestart, job.restart_seconds);
      } else {
        ++s.ready;
      }
      continue;
    }
    // The phase ended.
    switch (s.phase) {
      case Phase::kWork:
        if (finishes_work) s.work = job.work_seconds;  // no rounding left over
        enter(Phase::kCheckpoint, job.checkpoint_seconds);
        break;
      case Phase::kCheckpoint:
        s.saved = s.work;
        if (s.work >= job.work_seconds) return {s.t, s.cost, s.interruptions, true};
        if (s.ready > 0) {
          s.world += s.ready;
          s.ready = 0;
          enter(Phase::kRestart, job.resize_seconds);
        } else {
          start_work();
        }
        break;
      case Phase::kDetect:
        after_detect();
        break;
      case Phase::kRestart:
        start_work();
        break;
      case Phase::kWait:
        break;  // only an arrival ends a wait
    }
  }
}

Result<SimSummary> Simulate(const SimJob& job, const PreemptionModel& failures,
                            const std::vector<PreemptionEvent>& trace, int trials, uint64_t seed) {
  if (trials < 1) return Status::InvalidArgument(fmt::format("--trials={}: expected an integer >= 1", trials));
  if (!(job.work_seconds > 0) || !(job.interval_seconds > 0) || job.hosts < 1 || job.min_hosts < 1 ||
      job.min_hosts > job.hosts)
    return Status::InvalidArgument(fmt::format(
        "simulation needs work > 0, interval > 0 and 1 <= min_hosts <= hosts (got work {} s, interval {} s, hosts "
        "{}, min_hosts {})",
        job.work_seconds, job.interval_seconds, job.hosts, job.min_hosts));
  if (trace.empty() && !(failures.host_mtti_seconds > 0))
    return Status::InvalidArgument(fmt::format("host MTTI {} s: expected > 0", failures.host_mtti_seconds));
  SimSummary s;
  std::mt19937_64 rng(seed);
  std::vector<double> secs, costs;
  for (int i = 0; i < trials; ++i) {
    SimTrial t = SimulateTrial(job, failures, trace, rng);
    s.mean_seconds += t.completion_seconds / trials;
    s.mean_cost += t.cost_usd / trials;
    s.mean_interruptions += static_cast<double>(t.interruptions) / trials;
    s.unfinished += t.finished ? 0 : 1;
    secs.push_back(t.completion_seconds);
    costs.push_back(t.cost_usd);
    s.trials.push_back(t);
  }
  s.p50_seconds = Percentile(secs, 0.5);
  s.p90_seconds = Percentile(secs, 0.9);
  s.p50_cost = Percentile(costs, 0.5);
  s.p90_cost = Percentile(costs, 0.9);
  return s;
}

}  // namespace elastrain
