// Cluster mode and job control:
//   elastrain head --store etcd[s]://HOST:PORT [--store-ca ...] [--host H] [--port P]
//   elastrain agent --store etcd[s]://HOST:PORT [--store-ca ...] --slots K [--id ID] [--host-name N] [--address IP]
//   elastrain submit [--head URL] [--wait] [CONFIG.yml] [key=value ...]
//   elastrain status [--head URL | --run-dir DIR] [--json]
//   elastrain stop   [--head URL | --run-dir DIR] [--token T]
//   elastrain chaos  kill|hang --rank R | kill --hang --rank R | kill --host H  [--head URL | --run-dir DIR]
// The job commands talk to the controller's HTTP API (monitor/job_api.h): an
// `elastrain head`, or the embedded `elastrain train`, whose URL is in <run>/head_url.
#include <httplib.h>
#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/store_args.h"
#include "common/files.h"
#include "common/http_status.h"
#include "common/log.h"
#include "common/signals.h"
#include "elastic/agent.h"
#include "elastic/controller.h"
#include "wire/exit_codes.h"
#include "wire/worker_vocab.h"
#include "monitor/job_api.h"
#include "jobctl/run_token.h"
#include "store/store.h"

namespace elastrain {

namespace {

namespace fs = std::filesystem;

constexpr char kDefaultHead[] = "http://127.0.0.1:8265";
constexpr int kHttpTimeoutSeconds = 10;

std::atomic<bool> g_stop{false};


// --head URL, or the URL the run at --run-dir wrote, or the default.
Result<std::string> HeadUrl(const std::string& head, const std::string& run_dir) {
  if (!head.empty()) return head;
  if (run_dir.empty()) return std::string(kDefaultHead);
  auto text = ReadFile(run_dir + "/head_url");
  if (!text.ok())
    return Status::NotFound(fmt::format("--run-dir {}: no head_url there (is the job running? expected {}/head_url)",
                                        run_dir, run_dir));
  std::string url = text.value();
  while (!url.empty() && (url.back() == '\n' || url.back() == ' ')) url.pop_back();
  return url;
}

// One request to the head; the JSON answer, or the error it names.
Result<nlohmann::json> Call(const std::string& url, const std::string& method, const std::string& path,
                            const nlohmann::json& body = nlohmann::json::object(), const std::string& token = "") {
  httplib::Client cli(url);
  cli.set_connection_timeout(kHttpTimeoutSeconds);
  cli.set_read_timeout(kHttpTimeoutSeconds);
  if (!token.empty()) cli.set_bearer_token_auth(token);
  auto res = method == "GET" ? cli.Get(path) : cli.Post(path, body.dump(), "application/json");
  if (!res)
    return Status::Unavailable(fmt::format("cannot reach the head at {} ({}); is `elastrain head` or "
                                           "`elastrain train` running? (--head URL, --run-dir DIR)",
                                           url, httplib::to_string(res.error())));
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (res->status != kHttpOk) {
    std::string msg = j.is_object() ? j.value("error", res->body) : res->body;
    if (res->status == kHttpUnauthorized) msg += " (--token, ELASTRAIN_TOKEN or --run-dir)";
    const Status st = StatusFromHttp(res->status, msg);
    if (st.code() != StatusCode::kInternal) return st;
    return Status::Internal(fmt::format("{} {}{}: {}", method, url, path, st.message()));  // "HTTP 500: ..."
  }
  if (j.is_discarded()) return Status::Internal(fmt::format("{}{}: not JSON: {}", url, path, res->body.substr(0, 80)));
  return j;
}

// The control API's bearer token (monitor/run_token.h): --token, else $ELASTRAIN_TOKEN,
// else <run-dir>/token, else the token file of the run the head names, when this
// machine can read it.
Result<std::string> ApiToken(const std::string& url, const std::string& token, const std::string& run_dir) {
  if (!token.empty()) return token;
  if (const char* env = std::getenv("ELASTRAIN_TOKEN"); env && *env) return std::string(env);
  if (!run_dir.empty()) return ReadRunToken(run_dir);
  auto st = Call(url, "GET", "/api/v1/job");
  if (!st.ok()) return st.status();
  const std::string dir = st->value("run_dir", "");
  auto t = ReadRunToken(dir);
  if (!t.ok())
    return Status::NotFound(fmt::format("{}; pass --token TOKEN or set ELASTRAIN_TOKEN (the token is in {}/{} on "
                                        "the head's machine)",
                                        t.status().message(), dir, kTokenFileName));
  return t;
}

void PrintStatus(const nlohmann::json& j) {
  std::printf("job %s: %s\n", j.value("job", "").c_str(), j.value("state", "").c_str());
  std::printf("  %s\n", j.value("reason", "").c_str());
  std::printf("  generation %lld, %d workers (num_workers=%s), step %lld of %lld\n",
              static_cast<long long>(j.value("generation", int64_t{-1})), j.value("world", 0),
              j.value("num_workers", "").c_str(), static_cast<long long>(j.value("step", int64_t{0})),
              static_cast<long long>(j.value("steps", int64_t{0})));
  std::printf("  failures %lld (max_failures=%lld), restarts %lld, latest checkpoint step %lld\n",
              static_cast<long long>(j.value("failures", int64_t{0})),
              static_cast<long long>(j.value("max_failures", int64_t{0})),
              static_cast<long long>(j.value("restarts", int64_t{0})),
              static_cast<long long>(j.value("latest_checkpoint_step", int64_t{-1})));
  std::printf("  run directory %s\n", j.value("run_dir", "").c_str());
  if (j.contains("ranks") && !j["ranks"].empty()) {
    std::printf("  %-5s %-16s %-8s %-7s %-10s %s\n", "RANK", "HOST", "PID", "STEP", "PHASE", "WORKER");
    for (const auto& r : j["ranks"])
      std::printf("  %-5d %-16s %-8d %-7lld %-10s %s\n", r.value("rank", -1), r.value("host", "").c_str(),
                  r.value("pid", 0), static_cast<long long>(r.value("step", int64_t{-1})),
                  r.value("phase", "").c_str(), r.value("worker", "").c_str());
  }
  std::printf("  %d agents, %d idle workers\n", static_cast<int>(j.value("agents", nlohmann::json::array()).size()),
              j.value("idle_workers", 0));
}

}  // namespace

int RunHeadCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain head: the controller of cluster mode, with its HTTP API"};
  std::string store_url, host = "127.0.0.1";
  int port = 8265;
  app.add_option("--store", store_url, "etcd://HOST:PORT, etcds://HOST:PORT (TLS) or memory:// (a throwaway head)")->required();
  StoreOptions store_opt;
  AddStoreOptions(app, &store_opt);
  app.add_option("--host", host, "address the HTTP API listens on");
  app.add_option("--port", port, "port of the HTTP API (0: any free port)");
  if (int rc = ParseArgs(app, "head", args); rc >= 0) return rc;
  auto store = OpenStore(store_url, store_opt);
  if (!store.ok()) return FailCommand("head", store.status());
  JobApiServer api(store.value(), /*embedded=*/false);
  auto url = api.Start(host, port);
  if (!url.ok()) return FailCommand("head", url.status());
  std::printf("elastrain head: API at %s, store %s\n", url->c_str(), store_url.c_str());
  std::fflush(stdout);
  TerminationNotice notice([](int) { g_stop = true; }, TerminationNotice::Repeat::kCallAgain);
  Controller controller(store.value());
  while (!g_stop) {
    auto rec = controller.RunJob(g_stop);
    if (!rec.ok()) {
      if (g_stop) break;
      LOG_WARN("controller: {}", rec.status().message());
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    LOG_INFO("job {} ended: {}: {}", rec->job_id, JobStateName(rec->state), rec->reason);
  }
  api.Stop();
  return kExitSuccess;
}

int RunAgentCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain agent: runs the workers of this host"};
  std::string store_url;
  AgentOptions opt;
  double lease_seconds = kDefaultAgentLeaseTtl.count() / 1000.0;
  app.add_option("--store", store_url, "etcd://HOST:PORT or etcds://HOST:PORT (TLS)")->required();
  StoreOptions store_opt;
  AddStoreOptions(app, &store_opt);
  app.add_option("--slots", opt.slots, "worker processes on this host")->required()->check(CLI::Range(1, 4096));
  app.add_option("--id", opt.id, "agent id, unique among live agents (default: <host>-<pid>)");
  app.add_option("--host-name", opt.host, "this host's name for placement and messages (default: hostname)");
  app.add_option("--address", opt.address, "address the workers bind and peers reach (Gloo)");
  app.add_option("--lease-seconds", lease_seconds, "registration lease: host loss is noticed after this")
      ->check(CLI::Range(0.5, 3600.0));
  if (int rc = ParseArgs(app, "agent", args); rc >= 0) return rc;
  opt.lease_ttl = std::chrono::milliseconds(static_cast<int64_t>(lease_seconds * 1000));
  auto store = OpenStore(store_url, store_opt);
  if (!store.ok()) return FailCommand("agent", store.status());
  opt.worker_env = StoreCredentialsEnv(store_opt);  // the workers open the rendezvous store too
  Agent agent(store.value(), opt);
  Result<AgentEnd> end = Status::Internal("the agent did not run");
  {
    TerminationNotice notice([&agent](int) { agent.Preempt(); }, TerminationNotice::Repeat::kSecondSignalKills);
    end = agent.Run();
  }  // a notice after the end: nothing to save
  if (!end.ok()) return FailCommand("agent", end.status());
  return end.value() == AgentEnd::kPreempted ? kExitPreempted : kExitSuccess;
}

int RunSubmitCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain submit: submit a training job to a head"};
  std::string head;
  bool wait = false;
  std::vector<std::string> config_args;
  app.add_option("--head", head, std::string("the head's URL (default ") + kDefaultHead + ")");
  app.add_flag("--wait", wait, "wait for the job to end; exit with its outcome (0, 1, or 4 if stopped)");
  AddConfigArgs(app, &config_args);
  if (int rc = ParseArgs(app, "submit", args); rc >= 0) return rc;
  auto cfg = LoadConfigFromArgs(config_args);
  if (!cfg.ok()) return FailCommand("submit", cfg.status());
  // Paths are the submitter's: make them absolute for the agents (a shared filesystem).
  std::error_code ec;
  for (std::string* p : {&cfg->base_output_directory, &cfg->dataset_path, &cfg->tokenizer_path})
    if (!p->empty()) *p = fs::absolute(*p, ec).lexically_normal().string();
  const std::string url = head.empty() ? kDefaultHead : head;
  auto res = Call(url, "POST", "/api/v1/jobs", {{"config_yaml", ConfigToYaml(cfg.value())}});
  if (!res.ok()) return FailCommand("submit", res.status());
  std::printf("submitted job %s (run directory %s)\n", res->value("job_id", "").c_str(),
              res->value("run_dir", "").c_str());
  std::fflush(stdout);
  if (!wait) return kExitSuccess;
  const std::string job = res->value("job_id", "");
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto st = Call(url, "GET", "/api/v1/job");
    if (!st.ok()) continue;  // the head may be restarting
    if (st->value("job", "") != job) return FailCommand("submit", Status::Internal("the head now runs another job"));
    auto state = ParseJobState(st->value("state", ""));
    if (state.ok() && IsTerminal(state.value())) {
      std::printf("job %s %s: %s\n", job.c_str(), JobStateName(state.value()), st->value("reason", "").c_str());
      return ExitCodeForJobState(state.value());
    }
  }
}

int RunStatusCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain status: the job's state, generation, world size, step and ranks"};
  std::string head, run_dir;
  bool json = false;
  app.add_option("--head", head, "the head's URL");
  app.add_option("--run-dir", run_dir, "the run directory of an embedded `elastrain train`");
  app.add_flag("--json", json, "print the status as JSON");
  if (int rc = ParseArgs(app, "status", args); rc >= 0) return rc;
  auto url = HeadUrl(head, run_dir);
  if (!url.ok()) return FailCommand("status", url.status());
  auto st = Call(url.value(), "GET", "/api/v1/job");
  if (!st.ok()) return FailCommand("status", st.status());
  if (json) std::printf("%s\n", st->dump(2).c_str());
  else PrintStatus(st.value());
  return kExitSuccess;
}

int RunStopCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain stop: save a checkpoint and stop the job"};
  std::string head, run_dir, token;
  app.add_option("--head", head, "the head's URL");
  app.add_option("--run-dir", run_dir, "the run directory of an embedded `elastrain train`");
  app.add_option("--token", token, "the run's API token (default: $ELASTRAIN_TOKEN, or <run_dir>/token)");
  if (int rc = ParseArgs(app, "stop", args); rc >= 0) return rc;
  auto url = HeadUrl(head, run_dir);
  if (!url.ok()) return FailCommand("stop", url.status());
  auto tok = ApiToken(url.value(), token, run_dir);
  if (!tok.ok()) return FailCommand("stop", tok.status());
  auto st = Call(url.value(), "POST", "/api/v1/stop", nlohmann::json::object(), tok.value());
  if (!st.ok()) return FailCommand("stop", st.status());
  std::printf("stop requested: the job saves a checkpoint after its current step and ends STOPPED\n");
  return kExitSuccess;
}

int RunChaosCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain chaos: rehearse a failure of a running job"};
  std::string head, run_dir, action, host, token;
  int rank = -1;
  bool hang = false;
  app.add_option("action", action, "kill (SIGKILL) | hang (SIGSTOP)")->required()->check(CLI::IsMember({"kill", "hang"}));
  app.add_flag("--hang", hang, "with kill: stop the rank (SIGSTOP) instead, as `chaos hang`");
  app.add_option("--rank", rank, "the rank of the current generation");
  app.add_option("--host", host, "kill: a whole host, its agent and workers (cluster mode)");
  app.add_option("--head", head, "the head's URL");
  app.add_option("--run-dir", run_dir, "the run directory of an embedded `elastrain train`");
  app.add_option("--token", token, "the run's API token (default: $ELASTRAIN_TOKEN, or <run_dir>/token)");
  if (int rc = ParseArgs(app, "chaos", args); rc >= 0) return rc;
  if (hang) action = Name(CommandAction::kHang);
  if ((rank < 0) == host.empty())
    return FailCommand("chaos", Status::InvalidArgument("expected one of --rank R or --host H"));
  const auto parsed = Parse<CommandAction>(action);  // kill or hang (checked above)
  if (!host.empty() && (!parsed.ok() || parsed.value() != CommandAction::kKill))
    return FailCommand("chaos", Status::InvalidArgument("--host goes with kill (a lost host), not " + action));
  auto url = HeadUrl(head, run_dir);
  if (!url.ok()) return FailCommand("chaos", url.status());
  nlohmann::json body = {{"action", host.empty() ? action : Name(CommandAction::kHost)}, {"rank", rank}, {"host", host}};
  auto tok = ApiToken(url.value(), token, run_dir);
  if (!tok.ok()) return FailCommand("chaos", tok.status());
  auto st = Call(url.value(), "POST", "/api/v1/chaos", body, tok.value());
  if (!st.ok()) return FailCommand("chaos", st.status());
  std::printf("chaos: %s %s\n", action.c_str(), host.empty() ? fmt::format("rank {}", rank).c_str() : host.c_str());
  return kExitSuccess;
}

}  // namespace elastrain
