// Embedded mode's launcher: runs cfg.num_workers worker processes of one generation on
// this machine and reports how they ended. Workers find each other through a Gloo file
// store in <run>/rendezvous/ and know their peers' pids from <run>/workers.json, so a
// failed collective can name the lost peer.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "elastic/worker_group.h"

namespace elastrain {

struct LaunchResult {
  std::vector<WorkerExit> exits;  // failures first, in the order they were seen
  bool ok() const;
  std::string run_dir;
};

// Prepares the run directory (config.yml, logs/, a fresh rendezvous/), starts the
// workers as `elastrain worker ...` and waits for them. A worker failure ends the
// others (they notice through their collectives; stragglers are killed after a grace).
Result<LaunchResult> LaunchLocalWorkers(const TrainConfig& cfg);

// For a worker: "rank 2 (pid 1234) is gone" for each peer of <run>/workers.json whose
// process no longer runs; "" when all are alive.
std::string DescribeLostPeers(const std::string& run_dir);

}  // namespace elastrain
