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
  double reached = 0;          // the most work ever done: below it, work is redone
  double snapshot = 0;         // work in the last RAM snapshot (RAM tier)
  double since_snapshot = 0;   // compute seconds since it
  bool from_peers = false;     // the pending restart restores from peers (a covered interruption)
  double phase_left = 0;       // seconds until the phase ends (at the current speed for kWork)
  double segment_done = 0;     // compute seconds since the last checkpoint or restart
  Phase phase = Phase::kWork;
  int world = 0, ready = 0;
  std::priority_queue<double, std::vector<double>, std::greater<double>> arrivals;
  double cost = 0;
  int interruptions = 0, covered = 0;
  SimBreakdown seconds;
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

namespace {

// One trial as a discrete-event simulation: from each state, the time to the next event
// (the phase's end, an interruption, a host's return), then that event.
class Trial {
 public:
  Trial(const SimJob& job, const PreemptionModel& failures, const std::vector<PreemptionEvent>& trace,
        std::mt19937_64& rng)
      : job_(job), failures_(failures), trace_(trace), rng_(rng),
        usd_per_host_second_(job.usd_per_host_hour / 3600.0),
        give_up_(kMaxSimulatedFactor * std::max(job.work_seconds, 1.0)),
        copy_share_(job.ram_tier_coverage > 0 && job.snapshot_copy_seconds > 0
                        ? job.snapshot_copy_seconds / (job.snapshot_period_seconds + job.snapshot_copy_seconds)
                        : 0.0) {
    s_.world = job.hosts;
  }

  SimTrial Run() {
    while (true) {
      const double speed = static_cast<double>(s_.world) / job_.hosts;  // work per second while computing
      bool finishes_work = false;  // kWork ends with the last of the work (not at tau)
      const double phase_end = PhaseEnd(speed, &finishes_work);
      const double to_failure = ToFailure();
      const double to_arrival = s_.arrivals.empty() ? kInf : s_.arrivals.top() - s_.t;
      const double to_horizon = job_.horizon_seconds > 0 ? job_.horizon_seconds - s_.t : kInf;
      const double dt = std::min({phase_end, to_failure, to_arrival, to_horizon});
      if (s_.t + dt > give_up_ || !std::isfinite(dt)) {
        s_.cost += (s_.world + s_.ready) * usd_per_host_second_ * (give_up_ - s_.t);
        Account(give_up_ - s_.t, speed);
        return {give_up_, s_.cost, s_.interruptions, s_.covered, false, s_.seconds};
      }
      Advance(dt, speed);
      if (dt == to_horizon) return {s_.t, s_.cost, s_.interruptions, s_.covered, true, s_.seconds};
      if (dt == to_failure) OnInterruption();
      else if (dt == to_arrival) OnArrival();
      else if (PhaseEnded(finishes_work)) return {s_.t, s_.cost, s_.interruptions, s_.covered, true, s_.seconds};
    }
  }

 private:
  double Uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }
  double Exponential(double mean) { return -mean * std::log1p(-Uniform()); }
  void Enter(Phase p, double seconds) {
    s_.phase = p;
    s_.phase_left = seconds;
  }
  // Work resumes where the restore left it. Saves come every tau of work (as the job
  // saves every checkpoint_period steps), so a restore from peers, which keeps the work
  // since the last save, keeps its place in that schedule; a restore from disk is at a
  // save (work == saved).
  void StartWork() {
    s_.phase = Phase::kWork;
    s_.segment_done = std::max(0.0, s_.work - s_.saved);
  }

  double RestartSeconds() const { return s_.from_peers ? job_.peer_restore_seconds : job_.restart_seconds; }

  // RAM snapshots every snapshot_period_seconds of compute, each adding
  // snapshot_copy_seconds of wall time (copy_share_ of the work phase). Called after work
  // advanced `dt` compute seconds at `speed`.
  void NoteSnapshots(double dt, double speed) {
    if (job_.ram_tier_coverage <= 0) return;
    const double period = job_.snapshot_period_seconds;
    s_.since_snapshot += dt;
    if (period <= 0) {  // a snapshot at every instant
      s_.snapshot = s_.work, s_.since_snapshot = 0;
      return;
    }
    if (s_.since_snapshot < period) return;
    // It was < period before this dt, so the last snapshot fell within it, at this speed.
    s_.since_snapshot = std::fmod(s_.since_snapshot, period);
    s_.snapshot = std::max(s_.snapshot, s_.work - speed * s_.since_snapshot);
  }

  double PhaseEnd(double speed, bool* finishes_work) const {
    if (s_.phase != Phase::kWork) return s_.phase_left;
    const double wall = 1 / (1 - copy_share_);  // wall seconds per compute second
    const double to_checkpoint = (job_.interval_seconds - s_.segment_done) * wall;
    const double to_finish = (job_.work_seconds - s_.work) / speed * wall;
    *finishes_work = to_finish <= to_checkpoint;
    return std::min(to_checkpoint, to_finish);
  }

  // The next interruption: memoryless, so drawn afresh at every event.
  double ToFailure() {
    if (!trace_.empty()) return next_trace_ < trace_.size() ? std::max(trace_[next_trace_].time_seconds - s_.t, 0.0) : kInf;
    return s_.world > 0 ? Exponential(failures_.host_mtti_seconds / s_.world) : kInf;
  }

  // Books `dt` wall seconds of the current phase in their category (before Advance moves
  // the work on): computing below the high-water mark is redone, above it productive.
  void Account(double dt, double speed) {
    SimBreakdown& b = s_.seconds;
    switch (s_.phase) {
      case Phase::kWork: {  // the RAM tier's copies, then computing
        const double compute = dt * (1 - copy_share_);
        b.checkpoint += dt - compute;
        const double redo = speed > 0 ? std::clamp((s_.reached - s_.work) / speed, 0.0, compute) : 0.0;
        b.redone += redo;
        b.productive += compute - redo;
        break;
      }
      case Phase::kCheckpoint: b.checkpoint += dt; break;
      case Phase::kDetect:
      case Phase::kRestart: b.recovery += dt; break;
      case Phase::kWait: b.waiting += dt; break;
    }
  }

  void Advance(double dt, double speed) {
    Account(dt, speed);
    s_.t += dt;
    s_.cost += (s_.world + s_.ready) * usd_per_host_second_ * dt;
    if (s_.phase == Phase::kWork) {
      const double compute = dt * (1 - copy_share_);
      s_.work = std::min(job_.work_seconds, s_.work + speed * compute);
      s_.reached = std::max(s_.reached, s_.work);
      s_.segment_done += compute;
      NoteSnapshots(compute, speed);
    } else {
      s_.phase_left -= dt;
    }
  }

  void OnInterruption() {
    const PreemptionEvent drawn{0, trace_.empty() ? HostsLostFor(failures_.loss_sizes, Uniform()) : 0};
    const PreemptionEvent& e = trace_.empty() ? drawn : trace_[next_trace_++];
    const int lost = std::min(e.hosts_lost, s_.world);
    if (lost == 0) return;  // a trace event with nothing left to take
    ++s_.interruptions;
    // The draw only happens with a RAM tier that may or may not cover, so that a
    // disk-only job (coverage 0) consumes the random stream exactly as before. A notice
    // loses nothing.
    const double c = job_.ram_tier_coverage;
    const bool covered = e.notice || c >= 1 || (c > 0 && Uniform() < c);
    s_.covered += covered ? 1 : 0;
    s_.world -= lost;
    if (e.return_seconds == 0 || (e.return_seconds < 0 && failures_.replacement_seconds <= 0)) {
      s_.world += lost;  // replaced at once
    } else {
      for (int i = 0; i < lost; ++i)
        s_.arrivals.push(s_.t + (e.return_seconds > 0 ? e.return_seconds : Exponential(failures_.replacement_seconds)));
    }
    // Everything since the last checkpoint is redone; a covered one only since the last
    // snapshot. Work restored is also what the holders have: the next snapshot starts there.
    s_.work = e.notice ? s_.work : covered ? std::max(s_.saved, std::min(s_.snapshot, s_.work)) : s_.saved;
    s_.snapshot = s_.work;
    s_.since_snapshot = 0;
    s_.from_peers = covered;
    Enter(Phase::kDetect, job_.detection_seconds);
  }

  void OnArrival() {
    s_.arrivals.pop();
    if (s_.phase != Phase::kWait) {
      ++s_.ready;
      return;
    }
    ++s_.world;
    if (s_.world >= job_.min_hosts) Enter(Phase::kRestart, RestartSeconds());
  }

  // The current phase ran out. True when that finished the job (its last checkpoint).
  bool PhaseEnded(bool finishes_work) {
    switch (s_.phase) {
      case Phase::kWork:
        if (finishes_work) s_.work = job_.work_seconds;  // no rounding left over
        Enter(Phase::kCheckpoint, job_.checkpoint_seconds);
        break;
      case Phase::kCheckpoint:
        s_.saved = s_.work;
        if (s_.work >= job_.work_seconds) return true;
        if (s_.ready > 0) {
          s_.world += s_.ready;
          s_.ready = 0;
          Enter(Phase::kRestart, job_.resize_seconds);
        } else {
          StartWork();
        }
        break;
      case Phase::kDetect:
        s_.world += s_.ready;
        s_.ready = 0;
        if (s_.world >= job_.min_hosts && s_.world > 0) Enter(Phase::kRestart, RestartSeconds());
        else Enter(Phase::kWait, kInf);
        break;
      case Phase::kRestart:
        StartWork();
        break;
      case Phase::kWait:
        break;  // only an arrival ends a wait
    }
    return false;
  }

  const SimJob& job_;
  const PreemptionModel& failures_;
  const std::vector<PreemptionEvent>& trace_;
  std::mt19937_64& rng_;
  const double usd_per_host_second_, give_up_;
  const double copy_share_;  // of the work phase's wall time, the RAM tier's copies
  TrialState s_;
  size_t next_trace_ = 0;
};

}  // namespace

SimTrial SimulateTrial(const SimJob& job, const PreemptionModel& failures, const std::vector<PreemptionEvent>& trace,
                       std::mt19937_64& rng) {
  return Trial(job, failures, trace, rng).Run();
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
  if (!(job.ram_tier_coverage >= 0 && job.ram_tier_coverage <= 1) || !(job.snapshot_period_seconds >= 0) ||
      !(job.peer_restore_seconds >= 0) || !(job.snapshot_copy_seconds >= 0) ||
      !std::isfinite(job.snapshot_copy_seconds) || (job.snapshot_copy_seconds > 0 && job.snapshot_period_seconds <= 0))
    return Status::InvalidArgument(fmt::format(
        "RAM tier: expected coverage in [0, 1], snapshot period >= 0, peer restore >= 0 and a finite copy cost >= 0 "
        "(> 0 only with a snapshot period > 0) (got coverage {}, snapshot period {} s, peer restore {} s, copy {} s)",
        job.ram_tier_coverage, job.snapshot_period_seconds, job.peer_restore_seconds, job.snapshot_copy_seconds));
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
    s.mean_covered += static_cast<double>(t.covered) / trials;
    s.mean_breakdown.productive += t.seconds.productive / trials;
    s.mean_breakdown.redone += t.seconds.redone / trials;
    s.mean_breakdown.recovery += t.seconds.recovery / trials;
    s.mean_breakdown.checkpoint += t.seconds.checkpoint / trials;
    s.mean_breakdown.waiting += t.seconds.waiting / trials;
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
