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

// What a line of a JSON-lines file must hold to be kept: an object whose `numbers`
// fields, when present, are numbers (or null: NaN is written as null) and whose
// `strings` fields are strings. The files are read, never trusted: a damaged line is
// skipped with a warning naming file:line, so readers never meet a field of the wrong
// type.
struct JsonlSchema {
  std::vector<std::string> numbers, strings;
};
// The fields of metrics.jsonl and events.jsonl that the monitor and reports read.
const JsonlSchema& MetricsSchema();
const JsonlSchema& EventsSchema();
// "" when `j` fits `schema`, else why not ("field 'loss' is a string, expected a number").
std::string JsonlProblem(const nlohmann::json& j, const JsonlSchema& schema);

// Complete lines of a JSON-lines file; a partial last line waits for the next refresh.
// A file that shrank (a new run in the same directory) is read again from the start.
// Lines that are not JSON objects fitting the schema are skipped (with a warning).
class JsonlTail {
 public:
  explicit JsonlTail(std::string path = "", JsonlSchema schema = {})
      : path_(std::move(path)), schema_(std::move(schema)) {}
  void Refresh();
  const std::vector<nlohmann::json>& records() const { return records_; }
  int64_t skipped() const { return skipped_; }  // damaged lines seen so far

 private:
  std::string path_;
  JsonlSchema schema_;
  long offset_ = 0;
  int64_t line_ = 0;  // lines consumed so far (the next one is line_ + 1)
  int64_t skipped_ = 0;
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
