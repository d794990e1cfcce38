#include "elastic/health_gate.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "common/log.h"

namespace elastrain {

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The built-in figures of the measured hosts (unexpired records, figure > 0).
struct Medians {
  double gemm = 0, memory = 0;
  int gemm_hosts = 0, memory_hosts = 0;
};

Medians MediansOf(const std::map<std::string, const HealthRecord*>& live) {
  std::vector<double> gemm, memory;
  for (const auto& [host, r] : live) {
    if (r->gemm_gflops > 0) gemm.push_back(r->gemm_gflops);
    if (r->memory_gbps > 0) memory.push_back(r->memory_gbps);
  }
  Medians m;
  m.gemm_hosts = static_cast<int>(gemm.size());
  m.memory_hosts = static_cast<int>(memory.size());
  if (!gemm.empty()) m.gemm = Median(gemm);
  if (!memory.empty()) m.memory = Median(memory);
  return m;
}

// "" when the record's figures hold up against the other hosts'; else why not.
std::string CompareFigures(const HealthRecord& r, const Medians& m) {
  std::vector<std::string> slow;
  if (m.gemm_hosts >= kHealthMinHostsToCompare && r.gemm_gflops > 0 && r.gemm_gflops < kHealthFigureFraction * m.gemm)
    slow.push_back(fmt::format("GEMM {:.2f} GFLOP/s is {:.2f}x the median {:.2f} of {} hosts", r.gemm_gflops,
                               r.gemm_gflops / m.gemm, m.gemm, m.gemm_hosts));
  if (m.memory_hosts >= kHealthMinHostsToCompare && r.memory_gbps > 0 &&
      r.memory_gbps < kHealthFigureFraction * m.memory)
    slow.push_back(fmt::format("memory copy {:.2f} GB/s is {:.2f}x the median {:.2f} of {} hosts", r.memory_gbps,
                               r.memory_gbps / m.memory, m.memory, m.memory_hosts));
  if (slow.empty()) return "";
  std::string out;
  for (const std::string& s : slow) out += (out.empty() ? "" : "; ") + s;
  return fmt::format("{} (below {}x the median)", out, kHealthFigureFraction);
}

std::string Check(const HealthRecord& r) { return r.check.empty() ? "builtin" : r.check; }

}  // namespace

std::vector<HealthRecord> LoadHealthRecords(const std::vector<KeyValue>& kvs,
                                            std::map<std::string, std::string>* refused) {
  std::vector<HealthRecord> out;
  std::map<std::string, std::string> now_refused;
  for (const KeyValue& kv : kvs) {
    HealthRecord r;
    Status st = FromJson(kv.value, &r);
    const std::string host = kv.key.substr(std::min(kv.key.size(), keys::HealthPrefix().size()));
    std::string why;
    if (!st.ok()) why = st.message();
    else if (r.host != host) why = fmt::format("its host '{}' is not the key's '{}'", r.host, host);
    else if (!std::isfinite(r.checked_at) || !std::isfinite(r.expires_at) || r.expires_at < r.checked_at)
      why = fmt::format("checked_at {} and expires_at {}: expected finite times, expires_at >= checked_at",
                        r.checked_at, r.expires_at);
    else if (!std::isfinite(r.gemm_gflops) || !std::isfinite(r.memory_gbps) || r.gemm_gflops < 0 || r.memory_gbps < 0)
      why = fmt::format("gemm_gflops {} and memory_gbps {}: expected finite figures >= 0", r.gemm_gflops,
                        r.memory_gbps);
    if (why.empty()) {
      if (r.reason.size() > kMaxHealthReason) r.reason = r.reason.substr(0, kMaxHealthReason) + "...";
      out.push_back(std::move(r));
      continue;
    }
    // Refused: the host counts as unchecked (health_gate.h), never as healthy.
    if (!refused || (*refused)[kv.key] != why)
      LOG_WARN("controller: refused the health record {}: {}; the host counts as unchecked", kv.key, why);
    now_refused[kv.key] = why;
  }
  if (refused) *refused = std::move(now_refused);
  return out;
}

HealthGateResult GateHosts(const std::vector<AgentInfo>& agents, const std::vector<HealthRecord>& health,
                           const JobRecord& record, double now) {
  HealthGateResult out;
  // The newest record per host (the controller loads one per key; a test may give more).
  std::map<std::string, const HealthRecord*> newest, live;
  for (const HealthRecord& r : health) {
    if (r.host.empty()) continue;
    const HealthRecord*& n = newest[r.host];
    if (!n || r.checked_at > n->checked_at) n = &r;
  }
  for (const auto& [host, r] : newest)
    if (r->expires_at > now) live[host] = r;
  const Medians medians = MediansOf(live);

  std::map<std::string, bool> checks;  // host -> any live agent there runs health checks
  for (const AgentInfo& a : agents) checks[a.host] = checks[a.host] || a.health_checks;
  std::set<std::string> hosts;
  for (const auto& [host, c] : checks) hosts.insert(host);
  for (const auto& [host, t] : record.excluded_at) hosts.insert(host);

  auto ask = [&](const std::string& host) {
    if (!checks.count(host) || !checks[host]) return;  // nobody there to run it
    auto it = record.health_asked_at.find(host);
    if (it == record.health_asked_at.end() || now - it->second >= kHealthAskSeconds || it->second > now)
      out.ask.push_back(host);
  };

  for (const std::string& host : hosts) {
    HostVerdict v;
    v.host = host;
    auto lr = live.find(host);
    if (lr != live.end()) {
      const HealthRecord& r = *lr->second;
      v.record = &r;
      v.checked = true;
      if (!r.healthy) {
        v.reason = fmt::format("its health check ({}) failed at {:.0f}: {}", Check(r), r.checked_at,
                               r.reason.empty() ? "no reason given" : r.reason);
      } else {
        const std::string slow = CompareFigures(r, medians);
        v.healthy = slow.empty();
        if (!slow.empty()) v.reason = "its built-in probe is slow: " + slow;
      }
    } else if (checks.count(host) && checks[host]) {
      // An agent that runs checks but has no current record: not seen healthy.
      v.checked = true;
      auto n = newest.find(host);
      v.reason = n == newest.end()
                     ? "its agent runs health checks but no health record was found"
                     : fmt::format("its health record expired at {:.0f} (checked at {:.0f}); waiting for a new check",
                                   n->second->expires_at, n->second->checked_at);
      ask(host);
    }
    v.plannable = !v.checked || v.healthy;

    auto ex = record.excluded_at.find(host);
    if (ex != record.excluded_at.end()) {
      const double excluded = ex->second;
      auto cd = record.cooldown_until.find(host);
      const bool cooling = cd != record.cooldown_until.end() && cd->second > now;
      const bool fresh = v.record && v.healthy && v.record->checked_at > excluded;
      if (cooling) {
        // The policy's cool-down rule holds it back (a last resort for min_workers, as any
        // cooled-down host); the gate adds nothing until the cool-down is over.
      } else if (fresh || (checks.count(host) && !checks[host] && v.plannable)) {
        // A passing check newer than the exclusion (or an agent that runs no checks:
        // the cool-down is all there is).
        out.readmitted.push_back(host);
      } else {
        v.plannable = false;
        const std::string why = !v.reason.empty() ? v.reason
                                : v.record ? fmt::format("its last passing check was at {:.0f}", v.record->checked_at)
                                           : std::string("no health record");
        v.reason = fmt::format("excluded at {:.0f} for a gray failure; its cool-down is over, waiting for a passing "
                               "health check newer than the exclusion ({})",
                               excluded, why);
        if (std::find(out.ask.begin(), out.ask.end(), host) == out.ask.end()) ask(host);
      }
    }

    // Verdict changes become host_health events (the first verdict too, when unhealthy).
    if (v.checked) {
      auto seen = record.host_healthy.find(host);
      if ((seen == record.host_healthy.end() && !v.healthy) ||
          (seen != record.host_healthy.end() && seen->second != v.healthy)) {
        HostHealthEvent e;
        e.host = host;
        e.healthy = v.healthy;
        if (v.record) {
          e.agent = v.record->agent;
          e.check = Check(*v.record);
          e.gemm_gflops = v.record->gemm_gflops;
          e.memory_gbps = v.record->memory_gbps;
        }
        if (!v.healthy) e.reason = v.reason;
        out.events.push_back(std::move(e));
      }
    }
    out.hosts[host] = std::move(v);
  }
  for (const std::string& host : out.readmitted) {
    HostHealthEvent e;
    e.host = host;
    e.healthy = true;
    const HostVerdict& v = out.hosts[host];
    if (v.record) {
      e.agent = v.record->agent;
      e.check = Check(*v.record);
      e.gemm_gflops = v.record->gemm_gflops;
      e.memory_gbps = v.record->memory_gbps;
    }
    e.reason = v.record ? fmt::format("re-admitted: excluded at {:.0f}, its health check passed at {:.0f}",
                                      record.excluded_at.at(host), v.record->checked_at)
                        : fmt::format("re-admitted: excluded at {:.0f}, its cool-down is over (its agent runs no "
                                      "health checks)",
                                      record.excluded_at.at(host));
    out.events.push_back(std::move(e));
  }
  return out;
}

HealthGateResult ApplyHealthGate(const std::vector<AgentInfo>& agents, const std::vector<HealthRecord>& health,
                                 double now, const std::string& job_id, JobRecord* record,
                                 std::vector<AnyEvent>* events,
                                 std::vector<std::pair<std::string, AgentCommand>>* commands) {
  HealthGateResult g = GateHosts(agents, health, *record, now);
  for (const auto& [host, v] : g.hosts)
    if (v.checked) record->host_healthy[host] = v.healthy;
  for (const std::string& host : g.readmitted) record->excluded_at.erase(host);
  record->host_unplanned.clear();
  for (const auto& [host, v] : g.hosts)
    if (!v.plannable) record->host_unplanned[host] = v.reason;
  for (const std::string& host : g.ask) {
    record->health_asked_at[host] = now;
    for (const AgentInfo& a : agents)
      if (a.host == host && a.health_checks) {
        AgentCommand c;
        c.action = CommandAction::kCheckHealth;
        c.requested_at = now;
        c.job_id = job_id;
        commands->push_back({a.id, c});
      }
  }
  // A host no longer asked (it answered, or left) needs no entry.
  for (auto it = record->health_asked_at.begin(); it != record->health_asked_at.end();) {
    const auto v = g.hosts.find(it->first);
    const bool owes = v != g.hosts.end() && !v->second.plannable;
    it = owes ? std::next(it) : record->health_asked_at.erase(it);
  }
  for (HostHealthEvent& e : g.events) events->push_back(std::move(e));
  g.events.clear();
  return g;
}

}  // namespace elastrain
