#include "elastic/straggler.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace elastrain {
namespace {

// A step's seconds beyond this are not a measurement (a day per step).
constexpr double kMaxStepSeconds = 86400;

bool Plausible(double seconds) { return std::isfinite(seconds) && seconds >= 0 && seconds <= kMaxStepSeconds; }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The reason a record's anatomy cannot be judged, or "" when it can.
std::string Implausible(const RankTiming& t) {
  if (!Plausible(t.compute_seconds) || !Plausible(t.wait_seconds))
    return fmt::format("rank {} ({}): compute_seconds={} wait_seconds={}: expected seconds in [0, {}]", t.rank,
                       t.worker, t.compute_seconds, t.wait_seconds, kMaxStepSeconds);
  if (t.timed_steps < 0 || t.timed_steps > kAnatomyWindow)
    return fmt::format("rank {} ({}): timed_steps={}: expected [0, {}]", t.rank, t.worker, t.timed_steps,
                       kAnatomyWindow);
  return "";
}

// straggler_cleared for the worker `worker` as its track last saw it.
StragglerClearedEvent Cleared(const std::string& worker, const StragglerTrack& k, int64_t step, const char* reason) {
  StragglerClearedEvent e;
  e.generation = k.generation;
  e.rank = k.rank;
  e.worker = worker;
  e.host = k.host;
  e.slowdown = k.slowdown;
  e.step = step;
  e.reason = reason;
  return e;
}

}  // namespace

StragglerJudgement JudgeStragglers(const std::vector<RankTiming>& ranks, int64_t generation, int64_t step, double now,
                                   const StragglerSettings& s, std::map<std::string, StragglerTrack>* tracks) {
  StragglerJudgement out;
  // Who can be judged: a full window of this generation with plausible figures.
  std::vector<const RankTiming*> full;
  std::set<std::string> present;
  for (const RankTiming& t : ranks) {
    present.insert(t.worker);
    if (std::string why = Implausible(t); !why.empty()) {
      out.refused.push_back(std::move(why));
      continue;
    }
    if (t.timed_steps >= kAnatomyWindow && t.timed_until_step >= 0 && t.compute_seconds > 0) full.push_back(&t);
  }
  // Tracks of another generation or of a worker that left: dropped, a named one cleared.
  for (auto it = tracks->begin(); it != tracks->end();) {
    if (it->second.generation == generation && present.count(it->first)) {
      ++it;
      continue;
    }
    if (it->second.detected) out.cleared.push_back(Cleared(it->first, it->second, step, "generation ended"));
    it = tracks->erase(it);
  }
  if (full.size() < 2) return out;
  const double clear_below = 1 + (s.threshold - 1) / 2;
  for (const RankTiming* t : full) {
    std::vector<double> others;
    for (const RankTiming* o : full)
      if (o != t) others.push_back(o->compute_seconds);
    const double median = Median(others);
    if (!(median > 0)) continue;
    const double slowdown = t->compute_seconds / median;
    StragglerTrack& k = (*tracks)[t->worker];
    if (k.generation != generation) {
      k = StragglerTrack();
      k.generation = generation;
    }
    if (t->timed_until_step <= k.last_step) continue;  // no new step since the last judgement
    k.last_step = t->timed_until_step;
    k.slowdown = slowdown;
    k.rank = t->rank;
    k.host = t->host;
    const int64_t window_start = t->timed_until_step - t->timed_steps + 1;
    if (k.detected) {
      if (slowdown < clear_below) {
        k.detected = false;
        k.slow_since_step = -1;
        out.cleared.push_back(Cleared(t->worker, k, step, "back to pace"));
      }
      continue;
    }
    if (slowdown <= s.threshold || t->compute_seconds - median < kMinStragglerExcessSeconds) {
      k.slow_since_step = -1;
      continue;
    }
    if (k.slow_since_step < 0) {
      k.slow_since_step = window_start;
      k.slow_since_time = now;
    }
    if (t->timed_until_step - k.slow_since_step + 1 < s.persistence_steps) continue;
    if (now - k.slow_since_time < kMinStragglerPersistenceSeconds) continue;
    k.detected = true;
    StragglerDetectedEvent e;
    e.generation = generation;
    e.rank = t->rank;
    e.worker = t->worker;
    e.host = t->host;
    e.slowdown = slowdown;
    e.compute_seconds = t->compute_seconds;
    e.median_compute_seconds = median;
    e.since_step = k.slow_since_step;
    e.step = step;
    e.policy = std::string(StragglerPolicyName(s.policy));
    out.detected.push_back(std::move(e));
  }
  return out;
}

ExclusionCase WeighExclusion(const std::vector<RankTiming>& ranks, const std::vector<int>& out,
                             int64_t remaining_steps, const ReplanCost& cost, int next_world) {
  ExclusionCase c;
  std::vector<double> step, kept_compute;
  double out_compute = 0;  // the slowest straggler's computing: what bounds a step now
  size_t n_out = 0;
  for (const RankTiming& t : ranks) {
    if (!Plausible(t.compute_seconds) || !Plausible(t.wait_seconds)) continue;
    step.push_back(t.compute_seconds + t.wait_seconds);
    if (std::find(out.begin(), out.end(), t.rank) != out.end()) {
      out_compute = std::max(out_compute, t.compute_seconds);
      ++n_out;
    } else {
      kept_compute.push_back(t.compute_seconds);
    }
  }
  const bool measured = cost.seconds > 0;
  c.replan_cost_seconds = measured ? cost.seconds : kDefaultReplanSeconds;
  if (kept_compute.empty() || n_out == 0) {
    c.reason = "no rank would be left to train";
    return c;
  }
  const double world = static_cast<double>(kept_compute.size() + n_out);
  const double next = next_world > 0 ? std::min<double>(next_world, world) : static_cast<double>(kept_compute.size());
  c.now_step_seconds = Median(step);
  // What of a step is not the straggler's computing (the communication every rank pays)
  // stays; the straggler's computing gives way to the others' with their larger share.
  // From the step, not from the straggler's own wait: a CPU-throttled rank is frozen in
  // its all-reduces too, and that freeze is its wait, not the communication's.
  c.next_step_seconds = Median(kept_compute) * world / next + std::max(0.0, c.now_step_seconds - out_compute);
  c.expected_gain_seconds = static_cast<double>(std::max<int64_t>(0, remaining_steps)) *
                            (c.now_step_seconds - c.next_step_seconds);
  c.pays = c.expected_gain_seconds > c.replan_cost_seconds;
  c.reason = fmt::format(
      "{} remaining steps x ({:.3f}s now - {:.3f}s expected per step without it, on {} ranks) = {:.1f}s to gain, {} "
      "a re-plan's {:.1f}s ({})",
      remaining_steps, c.now_step_seconds, c.next_step_seconds, static_cast<int>(next), c.expected_gain_seconds,
      c.pays ? "more than" : "not more than", c.replan_cost_seconds,
      measured ? cost.measured_as : std::string("assumed: none measured yet"));
  return c;
}

}  // namespace elastrain
