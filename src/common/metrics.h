// What a run reports: metrics.jsonl (one JSON object per line, flushed as written) and
// a progress line on a terminal.
#pragma once

#include <cstdio>
#include <deque>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace elastrain {

class MetricsWriter {
 public:
  MetricsWriter() = default;
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  // Creates `path`, truncating it unless `append` (a resumed run continues its file).
  Status Open(const std::string& path, bool append = false);
  // Appends one line with a single write(2), so a crash loses at most that line and
  // several processes may append to the same file.
  Status Write(const nlohmann::json& record);
  // Fencing (a worker of a generation that may be stale, docs/elastic.md): every Write
  // first asks `fence` whether this process may still write to the shared file.
  //   OK                  write any held lines, in order, then this one;
  //   FailedPrecondition  never again (a newer generation owns the file): the line and
  //                       the held ones are dropped, and Write returns the error;
  //   anything else       (the store cannot be reached) hold the line, in order, for a
  //                       later Write whose fence says OK; Write returns OK. At most
  //                       kMaxHeldLines are held (the oldest go first).
  void set_fence(std::function<Status()> fence) { fence_ = std::move(fence); }
  size_t held_lines() const { return held_.size(); }
  static constexpr size_t kMaxHeldLines = 4096;
  // For a writer that resumes a file it alone appends to (another process's write in
  // flight would look torn): cuts a torn last line (a write cut short by a full disk, or
  // an edit), so that the next line starts on its own, and returns the whole lines among
  // the file's last `tail_bytes` (the first may be cut at the start). A torn line longer
  // than that is ended with a newline instead: a reader skips it as damaged.
  Result<std::string> TrimTornTail(size_t tail_bytes);

 private:
  Status WriteBytes(const std::string& bytes);  // one write(2)

  std::string path_;
  int fd_ = -1;
  std::function<Status()> fence_;
  std::deque<std::string> held_;
  bool fenced_out_ = false;
};

// "step 12/300 | loss 4.1234 | 12.3k tok/s | ETA 1m23s", redrawn in place on a
// terminal; silent otherwise (the logger carries the same figures every log_period).
class ProgressLine {
 public:
  ProgressLine();
  bool enabled() const { return enabled_; }
  void Update(int64_t step, int64_t steps, double loss, double tokens_per_sec, double eta_seconds);
  void Finish();  // ends the line

 private:
  bool enabled_;
  bool drawn_ = false;
};

std::string FormatDuration(double seconds);  // "1h02m", "3m05s", "12.3s"

}  // namespace elastrain
