#include "wire/job_status.h"

#include <ctime>

#include <fmt/format.h>

#include "common/json.h"
#include "wire/vocab_json.h"

namespace elastrain {

ELASTRAIN_JSON_RECORD(JobStatusAgent, id, host, slots, preempting, not_planned)
ELASTRAIN_JSON_RECORD(JobStatusRank, rank, host, agent, worker, pid, step, phase, compute_seconds, wait_seconds,
                      timed_steps, collective_seq, collective_kind, in_collective, straggler, slowdown)
ELASTRAIN_JSON_RECORD(JobStatusHost, host, health, check, reason, checked_at, expires_at, excluded_until)
ELASTRAIN_JSON_RECORD(JobStatusEvent, time, event, detail)
ELASTRAIN_JSON_RECORD(JobStatus, job, run_dir, steps, num_workers, max_failures, checkpoint_period,
                      cost_per_worker_hour, model_name, launched, state, reason, generation, world, step, failures,
                      restarts, latest_checkpoint_step, started_at, ended_at, agents, ranks, idle_workers, time, hosts,
                      gray_events, leader, leader_url)
ELASTRAIN_JSON_RECORD(SubmittedJob, job_id, run_dir)

nlohmann::json ToJsonValue(const JobStatus& s) { return s; }
nlohmann::json ToJsonValue(const SubmittedJob& s) { return s; }

Result<JobStatus> JobStatusFromJson(const nlohmann::json& j, std::string_view what) {
  return ParseRecord<JobStatus>(j, what, {.required = {"job", "run_dir", "state", "generation", "world", "step"}});
}

Result<SubmittedJob> SubmittedJobFromJson(const nlohmann::json& j, std::string_view what) {
  return ParseRecord<SubmittedJob>(j, what, {.required = {"job_id", "run_dir"}});
}

namespace {

// "12:04:05" (UTC) of a wall time.
std::string Clock(double t) {
  const std::time_t secs = static_cast<std::time_t>(t);
  std::tm tm{};
  if (t <= 0 || gmtime_r(&secs, &tm) == nullptr) return "-";
  char buf[16];
  std::strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
  return buf;
}

std::string Seconds(double s, int64_t timed) { return timed > 0 ? fmt::format("{:.3f}", s) : "-"; }

std::string LastCollective(const JobStatusRank& r) {
  if (r.collective_seq < 0) return "-";
  return fmt::format("#{} {}{}", r.collective_seq, r.collective_kind.empty() ? "?" : r.collective_kind,
                     r.in_collective ? " (inside)" : "");
}

}  // namespace

std::string FormatJobStatus(const JobStatus& s) {
  std::string out;
  out += fmt::format("job {}: {}\n", s.job, JobStateName(s.state));
  out += fmt::format("  {}\n", s.reason);
  // A launched program's steps are its own (the config's `steps` is the trainer's).
  const bool reported = s.step > 0 || s.latest_checkpoint_step >= 0;
  const std::string step = !s.launched ? fmt::format("step {} of {}", s.step, s.steps)
                           : reported  ? fmt::format("step {} (reported by the program)", s.step)
                                       : std::string("no step reported by the program");
  out += fmt::format("  generation {}, {} workers (num_workers={}), {}\n", s.generation, s.world, s.num_workers, step);
  const std::string ckpt = s.latest_checkpoint_step >= 0
                               ? fmt::format("latest checkpoint step {}", s.latest_checkpoint_step)
                           : s.launched ? std::string("no checkpoint reported by the program")
                                        : std::string("no checkpoint yet");
  out += fmt::format("  failures {} (max_failures={}), restarts {}, {}\n", s.failures, s.max_failures, s.restarts,
                     ckpt);
  if (s.launched && !reported)
    out += "  (the program reports no steps or checkpoints: elastrain_worker does, docs/launch.md)\n";
  out += fmt::format("  run directory {}\n", s.run_dir);
  if (!s.leader.empty())
    out += fmt::format("  led by head {}{}\n", s.leader, s.leader_url.empty() ? "" : " at " + s.leader_url);
  if (!s.ranks.empty()) {
    // compute and wait: seconds per step, means over the rank's last timed steps.
    out += fmt::format("  {:<5} {:<16} {:<8} {:<7} {:<10} {:>9} {:>9} {:<24} {}\n", "RANK", "HOST", "PID", "STEP",
                       "PHASE", "COMPUTE_S", "WAIT_S", "LAST_COLLECTIVE", "WORKER");
    for (const JobStatusRank& r : s.ranks) {
      std::string worker = r.worker;
      if (r.straggler) worker += fmt::format("  STRAGGLER {:.2f}x", r.slowdown);
      out += fmt::format("  {:<5} {:<16} {:<8} {:<7} {:<10} {:>9} {:>9} {:<24} {}\n", r.rank, r.host, r.pid, r.step,
                         r.phase, Seconds(r.compute_seconds, r.timed_steps), Seconds(r.wait_seconds, r.timed_steps),
                         LastCollective(r), worker);
    }
  }
  out += fmt::format("  {} agents, {} idle workers\n", s.agents.size(), s.idle_workers);
  for (const JobStatusAgent& a : s.agents)
    if (!a.not_planned.empty()) out += fmt::format("  agent {} on {} is not planned: {}\n", a.id, a.host, a.not_planned);
  if (!s.hosts.empty()) {
    out += "  hosts:\n";
    for (const JobStatusHost& h : s.hosts) {
      std::string line = fmt::format("    {:<16} {}", h.host, h.health);
      if (!h.check.empty()) line += fmt::format(" ({} check at {})", h.check, Clock(h.checked_at));
      if (!h.reason.empty()) line += ": " + h.reason;
      if (h.excluded_until > s.time) line += fmt::format("; EXCLUDED until {} UTC", Clock(h.excluded_until));
      out += line + "\n";
    }
  }
  if (!s.gray_events.empty()) {
    out += "  gray failures:\n";
    for (const JobStatusEvent& e : s.gray_events)
      out += fmt::format("    {} {:<19} {}\n", Clock(e.time), e.event, e.detail);
  }
  return out;
}

}  // namespace elastrain
