// `elastrain train [CONFIG.yml] [key=value ...]` and the internal `elastrain worker`.
#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/files.h"
#include "common/log.h"
#include "common/safe_path.h"
#include "common/signals.h"
#include "config/config.h"
#include "plan/mesh_for_config.h"
#include "train/dataset_for_config.h"
#include "data/dataset.h"
#include "elastic/admission.h"
#include "elastic/agent.h"
#include "elastic/controller.h"
#include "jobctl/job_control.h"
#include "jobctl/run_token.h"
#include "wire/exit_codes.h"
#include "train/worker.h"
#include "launch/launched_worker.h"
#include "wire/channel.h"
#include "monitor/job_api.h"
#include "store/store.h"
#include "train/resume_check.h"
#include "train/trainer.h"

namespace elastrain {

namespace {
int Fail(const Status& st) { return FailCommand("", st); }

// "a, b,c" -> {"a", "b", "c"}.
std::vector<std::string> SplitNames(const std::string& list) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : list + ",") {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  return out;
}

void PrintSummary(const TrainSummary& s) {
  // Never a result that this invocation did not train (a resumed, finished run).
  if (s.start_step >= s.steps) {
    std::printf("\nNothing to train: %s was already at step %lld of %lld (it resumed from its checkpoint); "
                "give another run_name to train again, or more steps to go on\n",
                s.run_dir.c_str(), static_cast<long long>(s.start_step), static_cast<long long>(s.steps));
    return;
  }
  if (s.start_step > 0)
    std::printf("\nResumed %s at step %lld: trained steps %lld..%lld\n", s.run_dir.c_str(),
                static_cast<long long>(s.start_step), static_cast<long long>(s.start_step + 1),
                static_cast<long long>(s.steps));
  const double drop = s.first_eval_loss > 0 ? 100.0 * (1.0 - s.final_eval_loss / s.first_eval_loss) : 0.0;
  // No evaluation ran (eval_interval <= 0): both losses are 0.
  const std::string eval = s.first_eval_loss == 0 && s.final_eval_loss == 0
                               ? std::string("none (eval_interval <= 0)")
                               : fmt::format("{:.4f} -> {:.4f} ({:.1f}% lower)", s.first_eval_loss,
                                             s.final_eval_loss, drop);
  std::printf(
      "\nTraining finished: %lld steps in %.1fs\n"
      "  loss       %.4f -> %.4f\n"
      "  eval loss  %s\n"
      "  throughput %.0f tokens/s, MFU %.1f%%\n"
      "  batch      %lld sequences per step (%lld micro-batches per rank)\n"
      "  outputs    %s/{config.yml,metrics.jsonl,train.log,summary.json}\n",
      static_cast<long long>(s.steps), s.wall_seconds, s.first_loss, s.final_loss, eval.c_str(), s.tokens_per_sec,
      100 * s.mfu, static_cast<long long>(s.global_batch_size), static_cast<long long>(s.micro_batches_per_step),
      s.run_dir.c_str());
}

void PrintLaunchSummary(const JobRecord& r, const TrainConfig& cfg, const std::string& run_dir) {
  std::printf("\nLaunched job finished: %lld generations, %lld failures (max_failures=%lld), last step reported %lld\n"
              "  outputs    %s/{events.jsonl,metrics.jsonl,logs/}\n",
              static_cast<long long>(r.generation + 1), static_cast<long long>(r.failures),
              static_cast<long long>(cfg.max_failures), static_cast<long long>(r.step), run_dir.c_str());
}
}  // namespace

// Embedded mode: the controller (a thread), the local agent (this thread: workers die
// with the thread that spawned them) and the HTTP API, in this process, over an
// in-memory store. SIGTERM or SIGINT is a preemption notice for the whole machine.
int RunEmbeddedJob(const TrainConfig& cfg) {
  const bool launched = !cfg.launch_program.empty();
  // Tokenise the corpus once here, so that the workers find the token cache ready (and
  // check token files once, so that a bad one fails the job before any worker starts).
  if (!launched && cfg.dataset_type != DatasetType::kSynthetic) {
    auto d = OpenDataset(DatasetOptionsForConfig(cfg));
    if (!d.ok()) return Fail(d.status());
  }
  std::shared_ptr<Store> store = MakeMemoryStore();
  auto spec = SubmitJob(*store, cfg);  // the in-memory store only: nothing on disk yet
  if (!spec.ok()) return Fail(spec.status());
  // The API's bearer token: <run>/token, created now or kept from the run being resumed;
  // a token file that fails the trust rule (jobctl/run_token.h) stops the run here.
  auto token = EnsureRunToken(spec->run_dir);
  if (!token.ok()) return Fail(token.status());
  // The workers' logs: a link there would fail every spawn, and the agent retries a spawn.
  if (Status st = MakeLogsDirectory(spec->run_dir); !st.ok()) return Fail(st);
  std::error_code ec;
  std::filesystem::remove_all(spec->run_dir + "/rendezvous", ec);  // keys of earlier runs
  JobApiOptions api_options;
  api_options.embedded = true;
  api_options.token = token.value();
  api_options.token_file = spec->run_dir + "/" + kTokenFileName;
  api_options.metrics_without_token = cfg.metrics_without_token;
  api_options.allowed_hosts = SplitNames(cfg.dashboard_allowed_hosts);
  api_options.tls_cert = cfg.dashboard_tls_cert;
  api_options.tls_key = cfg.dashboard_tls_key;
  JobApiServer api(store, api_options);
  auto url = api.Start(cfg.dashboard_host, static_cast<int>(cfg.dashboard_port));
  if (!url.ok() && url.status().code() == StatusCode::kUnavailable && cfg.dashboard_port != 0) {
    LOG_WARN("{}; serving the job API on a free port instead", url.status().message());
    url = api.Start(cfg.dashboard_host, 0);
  }
  if (!url.ok() && url.status().code() != StatusCode::kUnavailable) return Fail(url.status());  // TLS files
  const std::string url_file = spec->run_dir + "/" + kHeadUrlFileName;
  if (url.ok()) {
    if (Status st = WriteUrlFile(url_file, url.value()); !st.ok()) LOG_WARN("{}", st.message());
    LOG_INFO("job API at {} (elastrain status --run-dir {})", url.value(), spec->run_dir);
    // Never the token itself: stdout is often a log file too (docs/security.md).
    std::printf("dashboard: %s/ (token in %s, never printed: open %s/#token=<that token>)\n", url->c_str(),
                api_options.token_file.c_str(), url->c_str());
    std::fflush(stdout);
  } else {
    LOG_WARN("no job API: {}", url.status().message());
  }
  std::atomic<bool> stop_controller{false};
  Result<JobRecord> record = Status::Internal("the controller did not run");
  std::thread controller([&] {
    Controller c(store);
    record = c.RunJob(stop_controller);
  });
  AgentOptions ao;
  ao.id = "local";
  ao.slots = static_cast<int>(cfg.max_workers);
  ao.exit_when_job_ends = true;
  Agent agent(store, ao);
  Result<AgentEnd> end = Status::Internal("the agent did not run");
  {
    // On the signal thread (common/signals.h); a second signal ends the process at once.
    TerminationNotice notice([&agent](int) { agent.Preempt(); }, TerminationNotice::Repeat::kSecondSignalKills);
    end = agent.Run();
  }  // a notice after the end: nothing to save
  if (!end.ok() || end.value() != AgentEnd::kJobEnded) stop_controller = true;
  controller.join();
  api.Stop();
  // A URL nothing answers any more must not receive the run's token from the CLI.
  if (url.ok()) RemoveUrlFile(url_file, url.value());
  if (!end.ok()) return Fail(end.status());
  const bool succeeded = record.ok() && record->state == JobState::kSucceeded;  // a notice may come after the end
  if (end.value() == AgentEnd::kPreempted && !succeeded) {
    std::fprintf(stderr, "elastrain: preempted: the workers saved their state and left; run the same command to "
                         "resume\n");
    return kExitPreempted;
  }
  if (!record.ok()) return Fail(record.status());
  const JobRecord& r = record.value();
  if (r.state == JobState::kSucceeded && launched) {
    PrintLaunchSummary(r, cfg, spec->run_dir);
    return kExitSuccess;
  }
  if (r.state == JobState::kSucceeded) {
    auto s = ReadRunSummary(spec->run_dir);
    if (!s.ok()) return Fail(s.status());
    PrintSummary(s.value());
    std::printf("  elastic    %lld generations, %lld failures (max_failures=%lld), events in %s/events.jsonl\n",
                static_cast<long long>(r.generation + 1), static_cast<long long>(r.failures),
                static_cast<long long>(cfg.max_failures), spec->run_dir.c_str());
    return kExitSuccess;
  }
  if (r.state == JobState::kStopped)
    std::fprintf(stderr, "elastrain: %s; run the same command to resume\n", r.reason.c_str());
  else
    std::fprintf(stderr, "elastrain: error: job failed: %s\n", r.reason.c_str());
  return ExitCodeForJobState(r.state);
}

int RunTrainCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain train: train a model (one process, or elastic workers under an embedded controller)"};
  std::vector<std::string> config_args;
  AddConfigArgs(app, &config_args);
  if (int rc = ParseArgs(app, "train", args); rc >= 0) return rc;
  auto cfg = LoadConfigFromArgs(config_args);
  if (!cfg.ok()) return Fail(cfg.status());
  if (!cfg->launch_program.empty())
    return Fail(Status::InvalidArgument("launch_program is set: run a program of your own with `elastrain launch "
                                        "[CONFIG.yml] [key=value ...] -- PROGRAM ARGS`"));
  SetLogLevel(cfg->log_level);
  // An impossible mesh fails here, before any process starts.
  auto mesh = ResolveMeshForConfig(cfg.value());
  if (!mesh.ok()) return Fail(mesh.status());
  // So does a run directory that holds another model's checkpoint: once, exit 2.
  if (Status st = CheckResumeMatchesConfig(cfg.value()); !st.ok()) return Fail(st);
  if (cfg->max_workers > 1 || cfg->min_workers != cfg->max_workers) return RunEmbeddedJob(cfg.value());
  auto summary = Train(cfg.value());
  if (!summary.ok()) return Fail(summary.status());
  PrintSummary(summary.value());
  return 0;
}

int RunWorkerCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain worker: one worker process (started by an agent, not by hand)"};
  int channel_fd = -1;
  app.add_option("--channel-fd", channel_fd, "the agent's end of the channel (elastic/channel.h)")
      ->required();
  if (int rc = ParseArgs(app, "worker", args); rc >= 0) return rc;
  Channel ch(channel_fd);
  auto job = ReceiveJobMessage(&ch);
  if (!job.ok()) {
    LOG_ERROR("{}", job.status().message());
    return kExitFailure;
  }
  // What its agent admits (elastic/admission.h), checked before anything runs: a refusal
  // fails the job once, naming the agent and the key.
  if (job->confined) {
    auto cfg = LoadConfigText(job->config_yaml, "job config");
    Status st = cfg.ok() ? AdmitJob(Admission{job->agent, job->allowed_programs, job->allowed_paths}, cfg.value())
                         : cfg.status();
    if (!st.ok()) {
      LOG_ERROR("worker {}: {}", job->worker_id, st.message());
      (void)ch.Send(ToJson(WorkerMessage(FatalMessage{st.message()})));
      return kExitBadConfig;
    }
  }
  // `elastrain launch`: this worker runs the user's program instead of the trainer.
  if (auto cfg = LoadConfigText(job->config_yaml, "job config"); cfg.ok() && !cfg->launch_program.empty()) {
    SetLogLevel(cfg->log_level);
    return RunLaunchedWorker(&ch, job.value(), cfg.value());
  }
  return RunWorkerProcess(&ch, job.value());
}

}  // namespace elastrain
