// The environment of one rank of a launched program (`elastrain launch`): torchrun's
// contract, so that a script written for `torchrun` runs unchanged, plus ELASTRAIN_*
// variables for programs that want them. Pure: unit-tested in
// tests/unit/launch_test.cpp. docs/launch.md lists every variable.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace elastrain {

struct RankPeer {
  int rank = 0;
  std::string host;  // ranks with the same host share LOCAL_WORLD_SIZE
};

struct RankAssignment {
  int64_t generation = 0;     // TORCHELASTIC_RESTART_COUNT: generations before this one
  int rank = 0;
  int world = 1;
  std::vector<RankPeer> members;  // every rank of the generation (this one included)
  std::string master_addr;    // rank 0's address
  int master_port = 0;        // a free port on rank 0's host, for PyTorch's TCPStore
  int64_t max_failures = 0;   // TORCHELASTIC_MAX_RESTARTS (-1: unlimited)
  int64_t min_workers = 1, max_workers = 1;
  std::string run_id;         // TORCHELASTIC_RUN_ID
  std::string run_dir;
  std::string worker_id;
  int threads = 1;            // OMP_NUM_THREADS
};

// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE,
// ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME, MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID,
// TORCHELASTIC_USE_AGENT_STORE, OMP_NUM_THREADS, ELASTRAIN_GENERATION,
// ELASTRAIN_RUN_DIR, ELASTRAIN_WORLD_SIZE, ELASTRAIN_MIN_WORKERS, ELASTRAIN_MAX_WORKERS,
// ELASTRAIN_WORKER_ID. Local ranks count the ranks of the same host in rank order; group
// ranks count hosts in the order of their lowest rank.
std::map<std::string, std::string> RankEnvironment(const RankAssignment& a);

// The variables of an elastrain process that a launched program must not inherit: the
// store's credentials and the API token (ELASTRAIN_ETCD_*, ELASTRAIN_TOKEN).
const std::vector<std::string>& SecretEnvironmentPrefixes();

}  // namespace elastrain
