#include "monitor/run_view.h"

#include <fcntl.h>

#include <cstdio>

#include <fmt/format.h>

#include "ckpt/checkpoint.h"
#include "common/log.h"
#include "common/safe_path.h"

namespace elastrain {

const JsonlSchema& MetricsSchema() {
  static const JsonlSchema s{{"step", "loss", "eval_loss", "lr", "grad_norm", "step_time", "comm_time",
                              "checkpoint_stall", "checkpoint_wait", "tokens_per_sec", "mfu", "generation",
                              "world_size", "time", "wall_time"},
                             {}};
  return s;
}

const JsonlSchema& EventsSchema() {
  static const JsonlSchema s{{"time", "generation", "step", "world"}, {"event"}};
  return s;
}

std::string JsonlProblem(const nlohmann::json& j, const JsonlSchema& schema) {
  if (!j.is_object()) return "not a JSON object";
  for (const std::string& k : schema.numbers) {
    auto it = j.find(k);
    if (it != j.end() && !it->is_number() && !it->is_null())
      return fmt::format("field '{}' is {} ({}), expected a number", k, it->type_name(), it->dump().substr(0, 40));
  }
  for (const std::string& k : schema.strings) {
    auto it = j.find(k);
    if (it != j.end() && !it->is_string())
      return fmt::format("field '{}' is {} ({}), expected a string", k, it->type_name(), it->dump().substr(0, 40));
  }
  return "";
}

void JsonlTail::Refresh() {
  if (path_.empty()) return;
  auto fd = OpenFile(path_, O_RDONLY);  // not through a link (common/safe_path.h)
  if (!fd.ok()) return;
  FILE* f = ::fdopen(fd->get(), "rb");
  if (!f) return;
  fd->release();
  std::fseek(f, 0, SEEK_END);
  const long size = std::ftell(f);
  if (size < 0) {
    std::fclose(f);
    return;
  }
  if (size < offset_) {
    offset_ = 0;
    line_ = 0;
    skipped_ = 0;
    records_.clear();
  }
  std::string text(static_cast<size_t>(size - offset_), '\0');
  std::fseek(f, offset_, SEEK_SET);
  const size_t got = text.empty() ? 0 : std::fread(text.data(), 1, text.size(), f);
  std::fclose(f);
  text.resize(got);
  size_t begin = 0;
  for (size_t nl; (nl = text.find('\n', begin)) != std::string::npos; begin = nl + 1) {
    ++line_;
    if (nl == begin) continue;  // a blank line
    auto j = nlohmann::json::parse(text.begin() + begin, text.begin() + nl, nullptr, false);
    const std::string problem = j.is_discarded() ? "not valid JSON" : JsonlProblem(j, schema_);
    if (problem.empty()) {
      records_.push_back(std::move(j));
    } else {
      ++skipped_;
      LOG_WARN("{}:{}: {}; line skipped", path_, line_, problem);
    }
  }
  offset_ += static_cast<long>(begin);
}

void RunView::SetRunDir(const std::string& run_dir) {
  std::lock_guard<std::mutex> l(mu_);
  if (run_dir == run_dir_) return;
  run_dir_ = run_dir;
  events_ = JsonlTail(run_dir + "/events.jsonl", EventsSchema());
  metrics_ = JsonlTail(run_dir + "/metrics.jsonl", MetricsSchema());
}

std::string RunView::run_dir() const {
  std::lock_guard<std::mutex> l(mu_);
  return run_dir_;
}

RunSnapshot RunView::Snapshot(double now) {
  std::lock_guard<std::mutex> l(mu_);
  events_.Refresh();
  metrics_.Refresh();
  RunSnapshot s;
  s.events = events_.records();
  s.metrics = metrics_.records();
  s.goodput = ComputeGoodput(s.events, s.metrics, now);
  return s;
}

nlohmann::json CheckpointsJson(const std::string& run_dir) {
  nlohmann::json out = nlohmann::json::array();
  auto all = ckpt::ListCheckpoints(run_dir);
  if (!all.ok()) return out;
  for (const ckpt::CheckpointInfo& c : *all)
    out.push_back({{"step", c.step}, {"dir", c.dir}, {"committed", c.committed}, {"latest", c.latest},
                   {"bytes", c.bytes}});
  return out;
}

RunSnapshot ReadRun(const std::string& run_dir, double now) {
  RunView v;
  v.SetRunDir(run_dir);
  return v.Snapshot(now);
}

}  // namespace elastrain
