#include "ckpt/fault.h"

#include <csignal>
#include <cstdlib>
#include <unistd.h>

#include "common/log.h"

namespace elastrain::ckpt {

namespace {
const char* PointName(FaultPoint p) {
  switch (p) {
    case FaultPoint::kCrashAfterShard: return "crash_after_shard";
    case FaultPoint::kCrashBeforeManifest: return "crash_before_manifest";
    case FaultPoint::kCrashBeforeCommit: return "crash_before_commit";
    case FaultPoint::kCrashBeforeLatest: return "crash_before_latest";
    case FaultPoint::kFailWrite: return "fail_write";
  }
  return "?";
}
}  // namespace

bool FaultArmed(FaultPoint p, const std::string& path) {
  const char* env = std::getenv(kFaultEnv);
  if (env == nullptr || *env == '\0') return false;
  const std::string spec = env;
  const size_t at = spec.find('@');
  if (spec.substr(0, at) != PointName(p)) return false;
  return at == std::string::npos || path.find(spec.substr(at + 1)) != std::string::npos;
}

void MaybeCrash(FaultPoint p, const std::string& path) {
  if (!FaultArmed(p, path)) return;
  LOG_WARN("checkpoint: {}={} at {}: killing the process", kFaultEnv, PointName(p), path);
  spdlog::default_logger()->flush();
  ::raise(SIGKILL);
  ::_exit(137);  // not reached; SIGKILL cannot be caught
}

}  // namespace elastrain::ckpt
