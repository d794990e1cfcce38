// The bearer token that guards the control API's POSTs (stop, chaos): 32 random bytes
// as hex, generated once per run and kept in <run>/token with mode 0600, so only the
// user who owns the run directory can read it. `elastrain stop|chaos` read it from
// there (or take --token / ELASTRAIN_TOKEN when the run directory is elsewhere).
#pragma once

#include <string>

#include "common/status.h"

namespace elastrain {

inline constexpr char kTokenFileName[] = "token";

// Creates <run_dir>/token (mode 0600) unless it exists; returns the token either way.
Result<std::string> EnsureRunToken(const std::string& run_dir);
// The token of `run_dir`; NotFound naming the file when there is none.
Result<std::string> ReadRunToken(const std::string& run_dir);
// `authorization` is the request's Authorization header; compared in constant time.
bool BearerMatches(const std::string& authorization, const std::string& token);

}  // namespace elastrain
