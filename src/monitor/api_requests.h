// The request bodies of the control API's POSTs (monitor/job_api.h), parsed into
// structs. Pure functions of the body text: no I/O, no store, never throw, any input
// (a fuzzing harness calls them with arbitrary bytes). Semantic checks (does the rank
// exist, does the config load) belong to the caller.
//
// Bodies are JSON objects read as records (common/json.h); a field of the wrong JSON type
// or out of range, a missing or unknown field, a body that is not JSON, or one nested
// deeper than kMaxRequestJsonDepth is InvalidArgument (HTTP 400) naming the field, its
// value and what was expected: "chaos: field 'rank': expected an integer, got a string
// (\"1\"); expected {...}".
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace elastrain {

// Deeper nesting is refused before parsing (no request needs more than 1 level).
inline constexpr int kMaxRequestJsonDepth = 16;

// POST /api/v1/jobs: {"config_yaml": "<the job's config as YAML text>"}.
struct SubmitRequest {
  std::string config_yaml;  // required; may not be empty
};
Result<SubmitRequest> ParseSubmitRequest(std::string_view body);

// POST /api/v1/chaos: {"action": "kill"|"hang"|"host"|"slow"|"unslow"|"preempt", "rank": R,
// "host": NAME, "factor": F, "seconds": S}. factor goes with slow only, in (1,
// kMaxSlowFactor] (required); seconds with slow (0 or absent: until unslow) and preempt
// (when the slot returns; 0 or absent: never), in [0, kMaxSlowSeconds]; wire/protocol.h.
struct ChaosRequest {
  std::string action;  // required
  int rank = -1;       // a rank of the current generation; -1 (or absent): none
  std::string host;    // a host or agent id (cluster mode); "" (or absent): none
  double factor = 0;   // slow: how many times slower
  double seconds = 0;  // slow: for how long (0: until unslow)
};
Result<ChaosRequest> ParseChaosRequest(std::string_view body);

}  // namespace elastrain
