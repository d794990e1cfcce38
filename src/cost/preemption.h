// How capacity goes away: interruption events, each taking one or more hosts at once
// (correlated losses), either drawn at random from a per-host mean time to interrupt or
// replayed from a trace. Defaults and their sources: docs/cost.md.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/choice.h"
#include "common/status.h"

namespace elastrain {

enum class Capacity { kSpot, kOnDemand, kMix };
// The words of `elastrain cost` (--capacity) and its reports.
inline constexpr std::array<Choice<Capacity>, 3> kCapacityChoices = {{
    {"spot", Capacity::kSpot},
    {"on-demand", Capacity::kOnDemand},
    {"mix", Capacity::kMix},
}};
const char* CapacityName(Capacity c);  // "spot", "on-demand", "mix"

// One outcome of "how many hosts does an interruption event take".
struct LossSize {
  int hosts = 1;
  double probability = 1;
};

// The interruption process of one capacity type. Events reach a job of H hosts at rate
// H / host_mtti_seconds (so the job's MTTI is host_mtti_seconds / H); each takes
// `hosts` hosts with the given probability (at most the hosts the job has). A lost host
// comes back after an exponential wait of mean replacement_seconds (0: at once).
struct PreemptionModel {
  double host_mtti_seconds = 0;
  std::vector<LossSize> loss_sizes = std::vector<LossSize>(1, LossSize{1, 1.0});  // one host per event
  double replacement_seconds = 0;
};

// Documented defaults (docs/cost.md): spot hosts are interrupted once a day on average,
// with correlated losses (1 host 70%, 2 hosts 20%, 4 hosts 10%) and a 10-minute wait for
// capacity; on-demand hosts fail once per 264 days (Llama 3's 419 interruptions in 54
// days on 2,048 hosts), one at a time, replaced in 5 minutes.
constexpr double kDefaultSpotHostMttiSeconds = 24 * 3600.0;
constexpr double kDefaultOnDemandHostMttiSeconds = 264 * 24 * 3600.0;
constexpr double kDefaultSpotReplacementSeconds = 600;
constexpr double kDefaultOnDemandReplacementSeconds = 300;
PreemptionModel DefaultPreemption(Capacity c);

// "1:0.7,2:0.2,4:0.1" (hosts:probability, probabilities summing to 1 within 1e-6);
// `flag` names the option in errors.
Result<std::vector<LossSize>> ParseLossSizes(const std::string& spec, const std::string& flag);
double MeanHostsLost(const std::vector<LossSize>& sizes);
// The event size for a uniform draw u in [0, 1).
int HostsLostFor(const std::vector<LossSize>& sizes, double u);

// A recorded interruption: `hosts_lost` hosts go at `time_seconds` after the job starts.
struct PreemptionEvent {
  double time_seconds = 0;
  int hosts_lost = 1;
  // When the lost hosts come back: < 0, the failure model's replacement draw; 0, at once
  // (a killed process whose slot stays); +inf, never.
  double return_seconds = -1;
  // A preemption with notice: the job saved before the hosts left, so no work is lost
  // and it restarts as from peers (SimJob::peer_restore_seconds).
  bool notice = false;
};
// CSV with header `timestamp_seconds,hosts_lost`, timestamps non-decreasing and >= 0,
// hosts_lost >= 1. Errors name the file, line and column.
Result<std::vector<PreemptionEvent>> ParsePreemptionTrace(const std::string& text, const std::string& origin);
// LoadPreemptionTrace also reads a failure trace (cost/failure_trace.h, what `elastrain
// chaos replay` replays): its kills, hangs, preemptions and host losses, one host each.
Result<std::vector<PreemptionEvent>> LoadPreemptionTrace(const std::string& path);

}  // namespace elastrain
