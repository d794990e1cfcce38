// A failure history to replay against a running job (`elastrain chaos replay`, issue 37)
// and to feed the simulator (`elastrain cost simulate --trace`): kills, hangs,
// preemption notices, host losses and slowdowns, each at its time from the job's start.
// Format (docs/faults.md, "Replaying a failure trace"), CSV or JSON:
//   time_seconds,event,target,factor,seconds
//   30,kill,any,,
//   95.5,preempt,1,,120        rank 1 gets a notice; its slot comes back 120 s later
//   200,slow,2,4,60            rank 2 at a quarter of its CPU for 60 s
//   310,host_loss,h2,,600      the host's agent and workers die (cluster mode); a
//                              replacement host arrives 600 s later (empty or 0: never)
//   {"events": [{"time_seconds": 30, "event": "kill", "target": "any"}, ...]}
// Every file is untrusted: its size, event count, times and fields are bounded, and
// each error names the file, the line (CSV) or the event's index (JSON), and what was
// expected. Pure: no I/O but LoadFailureTrace's read.
#pragma once

#include <array>
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "common/choice.h"
#include "common/status.h"
#include "cost/preemption.h"

namespace elastrain {

enum class TraceAction { kKill, kHang, kPreempt, kHostLoss, kSlow, kUnslow };
inline constexpr std::array<Choice<TraceAction>, 6> kTraceActionChoices = {{
    {"kill", TraceAction::kKill},
    {"hang", TraceAction::kHang},
    {"preempt", TraceAction::kPreempt},
    {"host_loss", TraceAction::kHostLoss},
    {"slow", TraceAction::kSlow},
    {"unslow", TraceAction::kUnslow},
}};

// A rank event's target: rank >= 0, or kAnyRank (one of the running ranks, drawn by the
// replayer's seed). A host_loss names a host (or "any": one of the job's hosts).
constexpr int kAnyRank = -1;

struct TraceEvent {
  double time_seconds = 0;  // from the job's start, in the trace's own time
  TraceAction action = TraceAction::kKill;
  int rank = kAnyRank;      // rank events
  std::string host;         // host_loss: a host name, or "any"
  double factor = 0;        // slow: the CPU share lost, (1, 100]
  double seconds = 0;       // slow: how long (0: until unslow); preempt: until the slot returns, host_loss:
                            // until a replacement host arrives (0: never)
};

// Bounds of an acceptable trace (a hostile file is refused, not allocated).
constexpr size_t kMaxTraceBytes = 4u << 20;
constexpr size_t kMaxTraceEvents = 100'000;
constexpr double kMaxTraceSeconds = 366.0 * 24 * 3600;  // a year of history

// Whether `text` is a failure trace rather than cost/preemption.h's older form: JSON, or
// CSV whose first line that is neither blank nor a comment starts with time_seconds.
bool IsFailureTraceText(const std::string& text);
// Up to kMaxTraceBytes + 1 bytes of `in` (one more than a trace may have, so that the
// parser refuses a larger file by its size without reading all of it).
std::string ReadTraceBytes(std::istream& in);
// Parses CSV (the header above) or JSON (text starting with '{'); `origin` names it.
Result<std::vector<TraceEvent>> ParseFailureTrace(const std::string& text, const std::string& origin);
// Reads PATH (at most kMaxTraceBytes) and parses it.
Result<std::vector<TraceEvent>> LoadFailureTrace(const std::string& path);
// The CSV form (what ParseFailureTrace reads back to the same events).
std::string FailureTraceCsv(const std::vector<TraceEvent>& events);
// The interruptions among the events, for the simulator: kill, hang, preempt and
// host_loss each take one host (a slowdown takes none). A killed or hung rank's slot is
// taken again at once (return 0); a preempted one returns after its `seconds` (never
// when 0) and lost no work (notice); a lost host is replaced after its `seconds` (never
// when 0), with no notice.
std::vector<PreemptionEvent> TraceInterruptions(const std::vector<TraceEvent>& events);

// Synthetic histories (`elastrain chaos trace`): events of `mix` (kill, preempt, ...,
// drawn in proportion to their weights) over `duration_seconds`, either a Poisson
// process of `rate_per_hour`, or bursty: bursts at that rate, each of 1 + Poisson(
// burst_extra) events spread over `burst_seconds`. Targets are "any"; a preempt's slot
// returns, and a lost host is replaced, after `return_seconds`; a slowdown is by `slow_factor` for `slow_seconds`.
// The same spec and seed give the same trace.
struct TraceSpec {
  double duration_seconds = 3600;
  double rate_per_hour = 6;
  bool bursty = false;
  double burst_extra = 2;     // mean events added to a burst's first
  double burst_seconds = 60;  // a burst's events fall within this window
  std::vector<std::pair<TraceAction, double>> mix = {{TraceAction::kKill, 1}};
  double return_seconds = 300;
  double slow_factor = 4;
  double slow_seconds = 120;
  uint64_t seed = 1;
};
Result<std::vector<TraceEvent>> GenerateFailureTrace(const TraceSpec& spec);
// "kill:2,preempt:1,slow:1" (action:weight, weights > 0).
Result<std::vector<std::pair<TraceAction, double>>> ParseTraceMix(const std::string& spec);

}  // namespace elastrain
