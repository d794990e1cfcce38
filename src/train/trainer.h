// The worker's training loop: fetch batch -> forward -> backward -> reduce gradients ->
// clip -> AdamW -> report, for one *generation*: a fixed set of ranks on one mesh, from a
// restored state until the last step, a stop at a step boundary, or a failure.
// `elastrain train` with one worker runs a single generation in its own process; the
// elastic worker (elastic/worker.h) runs one generation after another in one process and
// keeps the training state in memory between them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plan/mesh.h"
#include "common/status.h"
#include "common/memory.h"
#include "config/config.h"
#include "config/derived.h"
#include "train/carried_state.h"
#include "train/run_summary.h"
#include "wire/stop_reason.h"
#include "wire/worker_vocab.h"

namespace gloo::rendezvous {
class Store;
}  // namespace gloo::rendezvous

namespace elastrain {

class CollectiveTracker;  // comm/collective_mark.h

// Where a generation's state comes from.
struct RestoreSpec {
  enum class Kind {
    kCheckpoint,  // the run's latest committed checkpoint, else load_*_path, else fresh
    kMemory,      // the replica of `source_rank` at `step`, sent to ranks that lack it;
                  // falls back to kCheckpoint if a newer checkpoint was committed meanwhile
    kPeers,       // every shard of generation `old_generation` (mesh fsdp x tensor
                  // old_fsdp x old_tensor) at `step` from the RAM of rank sources[shard]
                  // (train/peer_restore.h); falls back to kCheckpoint as kMemory does, or
                  // when a source does not hold its shard
  };
  Kind kind = Kind::kCheckpoint;
  int source_rank = 0;
  int64_t step = 0;
  int64_t old_generation = -1;
  int old_fsdp = 1, old_tensor = 1;
  std::vector<int> sources;
};

// What a step reports to whoever runs the generation.
struct StepReport {
  int64_t step = 0;        // steps done
  int64_t start_step = 0;  // the step this generation started from
  double loss = 0;
  double step_seconds = 0;
  double wall_time = 0;    // seconds since the epoch when the step completed
  // The step's anatomy: compute_seconds + wait_seconds == step_seconds.
  double compute_seconds = 0;  // forward, backward, update, loading its rows
  double wait_seconds = 0;     // blocked in collectives (waiting for peers, and the transfers)
};

// Hooks between the trainer and the elastic worker; every one is optional.
struct GenerationControl {
  // Polled once per step, before the step's last collective, with the step number it
  // would complete: the StopReason bits this rank asks for. The ranks OR their bits in
  // that collective, so all stop after the same step.
  std::function<int(int64_t step)> stop_reasons;
  // True when the generation must end at once, without agreement (its plan is gone).
  std::function<bool()> aborted;
  std::function<void(const StepReport&)> on_step;
  std::function<void(TrainPhase phase)> on_phase;  // setup, restore, train, eval, checkpoint
  std::function<void(int64_t step)> on_checkpoint;          // chief: a checkpoint of `step` committed
  // Fencing (cluster mode): OK while the store says this generation is still the job's
  // current one; FailedPrecondition once it is not; another error when the store cannot
  // be reached now. Asked before every write to the run's shared files (metrics and
  // events lines, checkpoint commits), so that a worker cut off from the job changes
  // nothing after the job moved on. Blocks up to a short store timeout; thread-safe.
  std::function<Status()> still_current;
};

// Where a rank stands in its generation.
struct WorkerContext {
  int rank = 0;
  int world = 1;                   // the generation's world size
  int64_t generation = 0;
  std::string rendezvous_dir;      // file store (embedded mode), when `store` is null
  std::shared_ptr<gloo::rendezvous::Store> store;  // etcd-backed Gloo store (cluster mode)
  std::string prefix = "gen/0";    // key prefix of this generation's groups
  std::string bind_address = "127.0.0.1";  // interface the Gloo transport binds
  std::optional<Mesh> mesh;        // the plan's mesh; unset: resolved from the config
  std::vector<std::string> hosts;  // hosts[r]: rank r's host, for the RAM tier's buddies (empty: one host)
  RestoreSpec restore;
  CarriedState* carried = nullptr; // in: what this process kept (may be empty); out: handed back
  GenerationControl control;
  bool inject_failure = true;      // fail_at_step is armed in this generation
  int64_t failures = 0;            // the job's failures before this generation (checkpoint_period=auto)
  int64_t covered_failures = 0;    // of those, the ones the RAM tier restored from peers
  double job_started_at = 0;       // when the job started, seconds since the epoch; 0: this process's start
  double peak_flops = 0;           // > 0: the MFU denominator measured once per process
  // Names lost peers when a collective fails, e.g. "rank 2 (pid 1234) is gone".
  std::function<std::string()> describe_lost_peers;
  // The worker's collective tracker, reset by the caller for this generation; every group
  // of all ranks enters it (GroupOptions::tracker). Null: the trainer keeps its own.
  CollectiveTracker* tracker = nullptr;
};

struct GenerationResult {
  Status status;                 // not ok: the generation failed (the state is still consistent)
  bool completed = false;        // trained through the last step
  int stop_reasons = 0;          // StopReason bits when it stopped early at a step boundary
  int64_t start_step = 0;        // the step it restored
  int64_t completed_step = 0;    // steps done when it ended (on failure too)
  bool injected_exit = false;    // fail_at_step (fail_mode=exit) fired: the process should exit 1
  TrainSummary summary;          // when completed
};

// Runs one generation as rank ctx.rank of ctx.world. With world > 1 every rank calls this
// in its own process. Fails early, before allocating, when the model and its optimizer
// state cannot fit in this machine's memory (status OutOfMemory). Writes
// <base_output_directory>/<run_name>/ (config.yml, metrics.jsonl, train.log,
// events.jsonl, summary.json from rank 0).
GenerationResult RunGeneration(const TrainConfig& cfg, const WorkerContext& ctx);

// One generation of one process: `elastrain train` with num_workers=1.
Result<TrainSummary> Train(const TrainConfig& cfg);

}  // namespace elastrain
