#include "elastic/local_launch.h"

#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "common/log.h"

namespace elastrain {

namespace fs = std::filesystem;

bool LaunchResult::ok() const {
  for (const WorkerExit& e : exits)
    if (!e.ok()) return false;
  return true;
}

namespace {
// True while `pid` runs (a zombie, killed but not yet reaped, counts as gone).
bool ProcessRuns(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z' && stat[close + 2] != 'X';
}
}  // namespace

std::string DescribeLostPeers(const std::string& run_dir) {
  auto text = ReadFile(run_dir + "/workers.json");
  if (!text.ok()) return "";
  std::string out;
  try {
    auto j = nlohmann::json::parse(text.value());
    for (auto& [rank, pid] : j["pids"].items()) {
      if (ProcessRuns(pid.get<int>())) continue;
      out += fmt::format("{}rank {} (pid {}) is gone", out.empty() ? "" : ", ", rank, pid.get<int>());
    }
  } catch (const std::exception&) {
    return "";
  }
  return out;
}

Result<LaunchResult> LaunchLocalWorkers(const TrainConfig& cfg) {
  LaunchResult result;
  const std::string run_dir = (fs::path(cfg.base_output_directory) / cfg.run_name).string();
  result.run_dir = run_dir;
  ELASTRAIN_RETURN_IF_ERROR(MakeDirs(run_dir + "/logs"));
  // Keys of an earlier launch would point the new workers at dead peers.
  std::error_code ec;
  fs::remove_all(run_dir + "/rendezvous", ec);
  ELASTRAIN_RETURN_IF_ERROR(MakeDirs(run_dir + "/rendezvous"));
  ELASTRAIN_RETURN_IF_ERROR(WriteFileAtomic(run_dir + "/config.yml", ConfigToYaml(cfg)));

  const int n = static_cast<int>(cfg.num_workers);
  const int threads = cfg.num_threads > 0
                          ? static_cast<int>(cfg.num_threads)
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / n);
  std::vector<WorkerSpec> specs;
  for (int r = 0; r < n; ++r) {
    WorkerSpec s;
    s.rank = r;
    s.args = {"worker", "--run-dir", run_dir, "--rank", std::to_string(r), "--world", std::to_string(n)};
    s.env = {{"OMP_NUM_THREADS", std::to_string(threads)}, {"OPENBLAS_NUM_THREADS", std::to_string(threads)}};
    s.log_path = fmt::format("{}/logs/rank_{}.log", run_dir, r);
    specs.push_back(std::move(s));
  }
  WorkerGroup group;
  ELASTRAIN_RETURN_IF_ERROR(group.Start(specs));
  nlohmann::json pids;
  for (auto& [rank, pid] : group.pids()) pids[std::to_string(rank)] = pid;
  ELASTRAIN_RETURN_IF_ERROR(WriteFileAtomic(run_dir + "/workers.json", nlohmann::json{{"pids", pids}}.dump() + "\n"));
  LOG_INFO("started {} workers ({} threads each); logs in {}/logs/", n, threads, run_dir);
  result.exits = group.Wait();
  return result;
}

}  // namespace elastrain
