// Which hosts may be planned, by their health checks (issue 32): a pure function of the
// live agents, the hosts' HealthRecords (elastrain/health/<host>, wire/protocol.h), the
// controller's persisted record and the time. No I/O, no clock: the policy calls it once
// per decision (elastic/policy.cpp) and `status` calls it to say why a host waits; the
// agent runs the checks (elastic/health_check.h).
//
// The rules, in words (docs/elastic.md, "Health checks"):
//   - A host whose record says unhealthy and has not expired is never planned, whatever
//     its agent is.
//   - A host whose agent runs health checks (AgentInfo::health_checks) is planned only on
//     a healthy, unexpired record: a missing or expired one (the agent could not write
//     it, or stopped renewing it) keeps it out, and the host is asked to check again
//     (AgentCommand check_health, at most once per kHealthAskSeconds).
//   - A host whose agents run no health checks (an older agent, `elastrain train`'s own)
//     and that has no unexpired record is planned as before: no check is no verdict.
//   - The built-in probe's figures are compared across hosts: with at least
//     kHealthMinHostsToCompare hosts measured (unexpired records with a figure > 0), a
//     host whose GEMM or memory figure is below kHealthFigureFraction x the median of
//     those hosts is unhealthy, with a reason naming both figures. Fewer hosts: no
//     comparison (two hosts cannot tell which one is slow).
//   - A host excluded for a gray failure (JobRecord::excluded_at) cools down as the
//     policy's cool-down rule says (cooldown_until: planned only as a last resort for
//     min_workers); once its cool-down is over it is not planned until a healthy record
//     checked after its exclusion exists, and it is asked for that check. Then it is
//     re-admitted: its excluded_at entry goes.
//   - Each change of a host's verdict against JobRecord::host_healthy is a host_health
//     event (a host seen unhealthy for the first time is one too; one first seen healthy
//     is recorded quietly), and host_healthy is updated.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "store/store.h"  // KeyValue
#include "wire/events.h"
#include "wire/protocol.h"

namespace elastrain {

// A figure below this fraction of the hosts' median is unhealthy. Half: a thermally
// throttled or badly shared host measures 0.3-0.6x; the probe takes the best of several
// short runs (elastic/health_check.h), so a busy moment on a shared machine does not.
inline constexpr double kHealthFigureFraction = 0.5;
// The fewest measured hosts a comparison needs.
inline constexpr int kHealthMinHostsToCompare = 3;
// How often a host that owes a check is asked again (a lost command, a slow check).
inline constexpr double kHealthAskSeconds = 30;

// One host's verdict, as the gate saw it.
struct HostVerdict {
  std::string host;
  bool plannable = true;   // may be planned (the cool-down rules of the policy still apply)
  bool checked = false;    // a health verdict exists (an unexpired record, or a required one missing)
  bool healthy = false;    // that verdict (meaningful when checked)
  std::string reason;      // why it is not plannable, for `status` and the event; "" when it is
  const HealthRecord* record = nullptr;  // its unexpired record, if any (points into the input)
};

struct HealthGateResult {
  std::map<std::string, HostVerdict> hosts;    // every host of a live agent, and every excluded host
  std::vector<std::string> ask;                // hosts to send check_health to (their agents)
  std::vector<HostHealthEvent> events;         // verdict changes, in host order
  std::vector<std::string> readmitted;         // excluded hosts that may be planned again
  // Whether `host` may be planned. A host the gate never saw (no live agent) may.
  bool Plannable(const std::string& host) const {
    auto it = hosts.find(host);
    return it == hosts.end() || it->second.plannable;
  }
};

// The longest reason kept from a record (a longer one is cut): events and `status` stay
// readable whatever a host wrote.
inline constexpr size_t kMaxHealthReason = 4096;

// The records of elastrain/health/ that load, as the controller reads them (hostile
// input): a value that does not parse, whose host is not its key's, or whose times or
// figures are not finite and in order is refused with a logged warning naming the key
// (the host then counts as unchecked, never as healthy). `refused` (may be null) holds
// key -> reason of the refusals logged last time: a refusal is logged once, not at every
// decision; it is replaced by this call's.
std::vector<HealthRecord> LoadHealthRecords(const std::vector<KeyValue>& kvs,
                                            std::map<std::string, std::string>* refused);

// The verdicts for the hosts of `agents`, from `health` (one record per host; a record
// for another host than the agents' is used only for the comparison of figures).
// `record` is read only: ApplyHealthGate writes what changed.
HealthGateResult GateHosts(const std::vector<AgentInfo>& agents, const std::vector<HealthRecord>& health,
                           const JobRecord& record, double now);

// The policy's one call: GateHosts, then into `record` the new host_healthy values,
// re-admitted hosts out of excluded_at, host_unplanned (each kept-out host's reason, for
// `status`), and health_asked_at for the hosts asked; the
// host_health events appended to `events` and a check_health command per asked host's
// agent to `commands`.
HealthGateResult ApplyHealthGate(const std::vector<AgentInfo>& agents, const std::vector<HealthRecord>& health,
                                 double now, const std::string& job_id, JobRecord* record,
                                 std::vector<AnyEvent>* events,
                                 std::vector<std::pair<std::string, AgentCommand>>* commands);

}  // namespace elastrain
