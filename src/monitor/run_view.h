// What the monitor knows of a run, read from its directory: events.jsonl and
// metrics.jsonl (tailed incrementally: each refresh parses only the lines appended since
// the last), the checkpoints, and the goodput accounting over them. Thread-safe: the
// HTTP server's handlers share one RunView.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "monitor/goodput.h"

namespace elastrain {

// Complete lines of a JSON-lines file; a partial last line waits for the next refresh.
// A file that shrank (a new run in the same directory) is read again from the start.
class JsonlTail {
 public:
  explicit JsonlTail(std::string path = "") : path_(std::move(path)) {}
  void Refresh();
  const std::vector<nlohmann::json>& records() const { return records_; }

 private:
  std::string path_;
  long offset_ = 0;
  std::vector<nlohmann::json> records_;
};

struct RunSnapshot {
  std::vector<nlohmann::json> events, metrics;
  GoodputBreakdown goodput;
};

class RunView {
 public:
  void SetRunDir(const std::string& run_dir);  // a new directory starts over
  std::string run_dir() const;
  // Reads what was appended and recomputes the goodput at wall time `now`.
  RunSnapshot Snapshot(double now);

 private:
  mutable std::mutex mu_;
  std::string run_dir_;
  JsonlTail events_, metrics_;
};

// The run's checkpoints as JSON: [{"step", "dir", "committed", "latest", "bytes"}].
nlohmann::json CheckpointsJson(const std::string& run_dir);

// Reads a whole run directory once (for `elastrain report`).
RunSnapshot ReadRun(const std::string& run_dir, double now);

}  // namespace elastrain
