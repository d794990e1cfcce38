// Goodput accounting: every second of a job's wall time, from `job_submitted` to its
// terminal `job_state` (or now, while it runs), falls in exactly one category:
//
//   initialisation  before the first step of the first generation that trained (process
//                   start, rendezvous, data loading, restore, the first eval)
//   waiting         WAITING_FOR_RESOURCES (fewer than min_workers could run)
//   recovery        from the end of a generation that trained to the first step of the
//                   next (failure detection, restart, rendezvous, restore), less waiting
//   redone          re-executing steps an earlier generation had already completed, and
//                   the lost tail of a generation that failed (after its last logged step)
//   checkpoint      blocking checkpoint stalls (`checkpoint_saved.stall_seconds`), and
//                   the tail of a generation stopped for a resize or a preemption (the
//                   stop-step save)
//   productive      the rest of the training spans: new steps, evals, logging
//
// Inputs are the run's events.jsonl and metrics.jsonl records, so the same numbers come
// out of the live dashboard, /metrics and `elastrain report`. A generation's step times
// come from metrics.jsonl, one record per `log_period` steps and never two for a step: a
// generation that redoes steps writes no lines for them, and its chief's `steps_redone`
// event says when it caught up (without it, the end is interpolated between logged
// steps). Its start step is the chief's `state_restored` (else the plan's). The lost
// tail is exact with log_period=1 and within one log period otherwise. The recovery spans are the ones the controller reports as
// `generation_first_step.recovery_seconds` (elastic/policy.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace elastrain {

enum class TimeCategory { kProductive, kRedone, kRecovery, kCheckpoint, kWaiting, kInit };
inline constexpr int kNumTimeCategories = 6;
const char* TimeCategoryName(TimeCategory c);  // "productive", "redone", ...

struct TimeSpan {
  double begin = 0, end = 0;
  TimeCategory category = TimeCategory::kInit;
  int64_t generation = -1;
};

struct GenerationSummary {
  int64_t generation = -1;
  int world = 0;
  double started = 0;       // generation_started
  double first_step = 0;    // when its first step began (0: it never trained)
  double ended = 0;         // when it stopped RUNNING (0: still running)
  std::string ended_as;     // RECOVERING | RESIZING | SUCCEEDED | STOPPED | FAILED | "" (running)
  int64_t start_step = 0;
  int64_t redone_steps = 0;
  double recovery_seconds = -1;  // the recovery span before it (-1: none, the first)
};

struct GoodputBreakdown {
  double start = 0, end = 0;  // job_submitted .. terminal state or now
  bool finished = false;
  std::string state;          // the last job state
  double seconds[kNumTimeCategories] = {};
  double worker_seconds = 0;  // sum over RUNNING time of the world size
  int64_t redone_steps = 0;
  std::vector<double> recoveries;  // each recovery span, in order
  std::vector<GenerationSummary> generations;
  std::vector<TimeSpan> spans;     // the timeline, in order, adjacent spans merged

  double wall() const { return end - start; }
  double total() const;  // sum of the categories (== wall, by construction)
  double at(TimeCategory c) const { return seconds[static_cast<int>(c)]; }
  double goodput() const { return wall() > 0 ? at(TimeCategory::kProductive) / wall() : 0; }
  nlohmann::json ToJson() const;
};

// `now` ends a job that has not finished. Records that lack the fields used are skipped.
GoodputBreakdown ComputeGoodput(const std::vector<nlohmann::json>& events,
                                const std::vector<nlohmann::json>& metrics, double now);

// "productive 81.2% (97.4s) | redone 2.1% ..." and a table, for `elastrain report`.
std::string FormatGoodput(const GoodputBreakdown& g);

}  // namespace elastrain
