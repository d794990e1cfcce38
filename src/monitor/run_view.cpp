#include "monitor/run_view.h"

#include <cstdio>

#include "ckpt/checkpoint.h"

namespace elastrain {

void JsonlTail::Refresh() {
  if (path_.empty()) return;
  FILE* f = std::fopen(path_.c_str(), "rb");
  if (!f) return;
  std::fseek(f, 0, SEEK_END);
  const long size = std::ftell(f);
  if (size < offset_) {
    offset_ = 0;
    records_.clear();
  }
  std::string text(static_cast<size_t>(size - offset_), '\0');
  std::fseek(f, offset_, SEEK_SET);
  const size_t got = text.empty() ? 0 : std::fread(text.data(), 1, text.size(), f);
  std::fclose(f);
  text.resize(got);
  size_t begin = 0;
  for (size_t nl; (nl = text.find('\n', begin)) != std::string::npos; begin = nl + 1) {
    auto j = nlohmann::json::parse(text.begin() + begin, text.begin() + nl, nullptr, false);
    if (j.is_object()) records_.push_back(std::move(j));
  }
  offset_ += static_cast<long>(begin);
}

void RunView::SetRunDir(const std::string& run_dir) {
  std::lock_guard<std::mutex> l(mu_);
  if (run_dir == run_dir_) return;
  run_dir_ = run_dir;
  events_ = JsonlTail(run_dir + "/events.jsonl");
  metrics_ = JsonlTail(run_dir + "/metrics.jsonl");
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
