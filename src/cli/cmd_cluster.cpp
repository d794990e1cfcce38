// Cluster mode and job control:
//   elastrain head --store etcd[s]://HOST:PORT [--store-ca ...] [--host H] [--port P] [--token-file F]
//                  [--tls-cert C --tls-key K] [--metrics-without-token] [--allowed-host N]
//   elastrain agent --store etcd[s]://HOST:PORT [--store-ca ...] [--slots K] [--id ID] [--host-name N] [--address IP]
//                   [--health-check CMD] [--health-check-timeout S] [--health-check-period S]
//                   (identity defaults from Kubernetes' downward API or Slurm: elastic/host_identity.h)
//   elastrain submit [--head URL] [--wait] [CONFIG.yml] [key=value ...] [-- PROGRAM ARGS]
//   elastrain status [--head URL | --run-dir DIR] [--json]
//   elastrain stop   [--head URL | --run-dir DIR]
//   (elastrain chaos: cli/cmd_chaos.cpp)
// (each job command also takes --token-file PATH and --ca-cert PATH)
// The job commands talk to the controller's HTTP API (monitor/job_api.h): an
// `elastrain head`, or the embedded `elastrain train`, whose URL is in <run>/head_url;
// which URL and token they use: cli/api_client.h. An answer they cannot read (not an
// elastrain head, or one of another version) is one line on stderr and exit code 5
// (kExitBadAnswer, wire/exit_codes.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/api_client.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/job_flags.h"
#include "cli/store_args.h"
#include "common/dataset_path.h"
#include "common/files.h"
#include "common/log.h"
#include "common/signals.h"
#include "elastic/admission.h"
#include "elastic/agent.h"
#include "elastic/controller.h"
#include "elastic/host_identity.h"
#include "wire/exit_codes.h"
#include "wire/protocol.h"
#include "wire/worker_vocab.h"
#include "monitor/job_api.h"
#include "jobctl/run_token.h"
#include "store/signed_records.h"
#include "store/store.h"

namespace elastrain {

namespace {

namespace fs = std::filesystem;


std::atomic<bool> g_stop{false};

void PrintStatus(const JobStatus& s) { std::fputs(FormatJobStatus(s).c_str(), stdout); }


}  // namespace

int RunHeadCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain head: the controller of cluster mode, with its HTTP API"};
  std::string store_url, host = "127.0.0.1", token_file = DefaultHeadTokenPath();
  int port = 8265;
  JobApiOptions api_options;
  app.add_option("--store", store_url, "etcd://HOST:PORT, etcds://HOST:PORT (TLS) or memory:// (a throwaway head)")->required();
  StoreOptions store_opt;
  AddStoreOptions(app, &store_opt);
  app.add_option("--host", host, "address the HTTP API listens on");
  app.add_option("--port", port, "port of the HTTP API (0: any free port)");
  app.add_option("--token-file", token_file,
                 "the API's bearer token: created (mode 0600) when missing; its URL is written beside it as head_url")
      ->capture_default_str();
  app.add_option("--tls-cert", api_options.tls_cert, "PEM certificate: serve the API over HTTPS (with --tls-key)");
  app.add_option("--tls-key", api_options.tls_key, "PEM private key of --tls-cert");
  app.add_flag("--metrics-without-token", api_options.metrics_without_token,
               "serve /metrics without the token (to a Prometheus without one)");
  app.add_option("--allowed-host", api_options.allowed_hosts,
                 "a Host name the API answers besides --host (e.g. a proxy's name; repeatable)");
  std::string signing_key_file = DefaultHeadSigningKeyPath();
  app.add_option("--signing-key", signing_key_file,
                 "the head's Ed25519 key: it signs the job spec, plans and commands agents act on; created (mode "
                 "0600) when missing, its public half written beside it as KEY.pub for the agents' --head-public-key")
      ->capture_default_str();
  double store_wait = 0;
  AddStoreWaitOption(app, &store_wait);
  if (int rc = ParseArgs(app, "head", args); rc >= 0) return rc;
  if (api_options.tls_cert.empty() != api_options.tls_key.empty())
    return FailCommand("head", Status::InvalidArgument("--tls-cert and --tls-key go together"));
  auto token = EnsureHeadToken(token_file);
  if (!token.ok()) return FailCommand("head", token.status());
  auto signing_key = SigningKey::LoadOrCreate(signing_key_file);
  if (!signing_key.ok()) return FailCommand("head", signing_key.status());
  auto opened = OpenStoreWaiting(store_url, store_opt, store_wait);
  if (!opened.ok()) return FailCommand("head", opened.status());
  // Everything the head writes that agents act on is signed (store/signed_records.h).
  Result<std::shared_ptr<Store>> store = MakeSigningStore(opened.value(), signing_key.value(), keys::HeadSigned);
  api_options.token = token.value();
  api_options.token_file = token_file;
  // The head runs only a job spec it signed itself (its API wrote it), never one put in
  // the store by anyone else; its API shows none but its own spec and plan either.
  auto own_key = VerifyKey::FromPem(signing_key.value()->public_key_pem(), signing_key_file + ".pub");
  if (!own_key.ok()) return FailCommand("head", own_key.status());
  JobApiServer api(MakeVerifyingStore(store.value(), own_key.value(),
                                      [](const std::string& k) { return k == keys::JobSpec() || k == keys::JobPlan(); }),
                   api_options);
  auto url = api.Start(host, port);
  if (!url.ok()) return FailCommand("head", url.status());
  // The CLI sends this token only to the URL recorded beside it (cli/api_client.h).
  // A token in a mounted secret (Kubernetes) has no writable directory beside it: clients
  // there name the head with --head.
  const std::string url_file = UrlFileBeside(token_file);
  const bool record_url = !OnReadOnlyFileSystem(fs::path(url_file).parent_path().string());
  if (record_url) {
    if (Status st = WriteUrlFile(url_file, url.value()); !st.ok()) return FailCommand("head", st);
  }
  if (std::error_code ec; fs::exists(signing_key_file + ".pub", ec))
    std::printf("elastrain head: signing key %s (agents verify with --head-public-key %s.pub)\n",
                signing_key_file.c_str(), signing_key_file.c_str());
  else  // a read-only (mounted) key: its public half is the agents' own secret
    std::printf("elastrain head: signing key %s (agents verify with its public key)\n", signing_key_file.c_str());
  std::printf("elastrain head: API at %s, store %s, token %s (%s)\n", url->c_str(), store_url.c_str(),
              token_file.c_str(),
              record_url ? ("URL recorded in " + url_file).c_str() : "a read-only mount: the URL is not recorded");
  // Never the token itself: stdout ends in log files (Slurm, kubectl logs); docs/security.md.
  std::printf("dashboard: %s/ (token in %s, never printed: open %s/#token=<that token>)\n", url->c_str(),
              token_file.c_str(), url->c_str());
  std::fflush(stdout);
  TerminationNotice notice([](int) { g_stop = true; }, TerminationNotice::Repeat::kCallAgain);
  ControllerOptions controller_opt;
  controller_opt.spec_key = own_key.value();
  controller_opt.head_url = url.value();
  controller_opt.announce_lead = true;
  Controller controller(store.value(), controller_opt);
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
  // A URL nothing answers any more must not receive the token (unless another head
  // has recorded its own since).
  if (record_url) RemoveUrlFile(url_file, url.value());
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
  HostIdentity flags;
  app.add_option("--slots", flags.slots, "worker processes on this host (default under Slurm: SLURM_GPUS_ON_NODE)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--id", flags.id,
                 "agent id, unique among live agents (default: POD_NAME; under Slurm <node>-<job>.<step>; else "
                 "<host>-<pid>)");
  app.add_option("--host-name", flags.host,
                 "this host's name for placement and messages (default: NODE_NAME, SLURMD_NODENAME, hostname)");
  app.add_option("--address", flags.address,
                 "address the workers bind and peers reach (Gloo) (default: POD_IP, else this host's address on the "
                 "route to the store)");
  app.add_option("--lease-seconds", lease_seconds, "registration lease: host loss is noticed after this")
      ->check(CLI::Range(0.5, 3600.0));
  double health_timeout = kDefaultHealthCheckTimeout.count() / 1000.0;
  std::string head_public_key;
  bool insecure_unsigned = false;
  app.add_option("--head-public-key", head_public_key,
                 "the head's public key (the head writes it as KEY.pub beside its --signing-key): only a job spec, "
                 "plan or command the head signed is run");
  std::vector<std::string> allow_programs, allow_paths;
  app.add_option("--allow-program", allow_programs,
                 "a program (or a directory of programs) a job may launch (elastrain launch / submit -- PROG); "
                 "repeatable. None: only elastrain's own trainer runs. Allowing an interpreter (python3) allows any "
                 "script it is given");
  app.add_option("--allow-path", allow_paths,
                 "a directory the paths a job sets (its run directory, dataset_path, tokenizer_path, load_*_path, "
                 "final_params_path) must lie in; repeatable (default: this agent's working directory)");
  app.add_flag("--insecure-unsigned-jobs", insecure_unsigned,
               "run whatever job the store holds, unsigned (anyone who can write the store can then run programs "
               "as this agent's user)");
  app.add_option("--health-check", opt.health_check_command,
                 "a command (run by /bin/sh -c) that checks this host: exit 0 = healthy, else its output is the "
                 "reason; run with the built-in checks at registration, on the controller's request and "
                 "periodically while idle");
  app.add_option("--health-check-timeout", health_timeout, "seconds the --health-check command may run")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--health-check-period", opt.health_check_period,
                 "seconds between health checks while idle (0: only at registration and when the controller asks)")
      ->check(CLI::Range(0.0, 86400.0));
  double store_wait = 0;
  AddStoreWaitOption(app, &store_wait);
  if (int rc = ParseArgs(app, "agent", args); rc >= 0) return rc;
  opt.health_checks = true;  // the built-in checks always run under `elastrain agent`
  if (!head_public_key.empty() && insecure_unsigned)
    return FailCommand("agent", Status::InvalidArgument("--head-public-key and --insecure-unsigned-jobs exclude each other"));
  if (!head_public_key.empty()) {
    auto key = VerifyKey::Load(head_public_key);
    if (!key.ok()) return FailCommand("agent", key.status());
    opt.head_key = key.value();
  } else if (!insecure_unsigned) {
    return FailCommand("agent", Status::InvalidArgument(
                                    "--head-public-key FILE is required: the head's public key (it writes KEY.pub "
                                    "beside its --signing-key, default ~/.elastrain/head_signing_key.pub); only what "
                                    "the head signed is run. --insecure-unsigned-jobs runs whatever the store holds "
                                    "(anyone who can write the store can then run programs as this user)"));
  } else {
    LOG_WARN("agent: --insecure-unsigned-jobs: job specs, plans and commands from the store are run unverified; "
             "anyone who can write the store can run programs as this user");
  }
  opt.health_check_timeout = std::chrono::milliseconds(static_cast<int64_t>(health_timeout * 1000));
  {
    Admission admission;
    auto programs = ResolveAllowList(allow_programs, "--allow-program", /*directories_only=*/false);
    if (!programs.ok()) return FailCommand("agent", programs.status());
    if (allow_paths.empty()) allow_paths.push_back(fs::current_path().string());
    auto paths = ResolveAllowList(allow_paths, "--allow-path", /*directories_only=*/true);
    if (!paths.ok()) return FailCommand("agent", paths.status());
    admission.programs = programs.value();
    admission.paths = paths.value();
    opt.admission = std::move(admission);
  }
  auto identity = ResolveHostIdentity(flags, [](const char* name) { return std::getenv(name); });
  if (!identity.ok()) return FailCommand("agent", identity.status());
  if (identity->address.empty()) {
    auto where = ParseStoreUrl(store_url);
    if (!where.ok()) return FailCommand("agent", where.status());
    if (where->kind == StoreAddress::Kind::kMemory) {
      identity->address = "127.0.0.1";
    } else {
      auto local = LocalAddressToward(where->host, where->port);
      if (!local.ok()) return FailCommand("agent", local.status());
      identity->address = local.value();
    }
  }
  if (!identity->learned_from.empty()) LOG_INFO("agent: identity from {}", identity->learned_from);
  opt.id = identity->id;
  opt.admission->agent = identity->id;
  LOG_INFO("agent {}: runs {}; job paths within {}", opt.id,
           opt.admission->programs.empty() ? std::string("only elastrain's own trainer")
                                           : "elastrain's trainer and " + fmt::format("{}", fmt::join(opt.admission->programs, ", ")),
           fmt::format("{}", fmt::join(opt.admission->paths, ", ")));
  opt.host = identity->host;
  opt.address = identity->address;
  opt.slots = identity->slots;
  opt.lease_ttl = std::chrono::milliseconds(static_cast<int64_t>(lease_seconds * 1000));
  auto store = OpenStoreWaiting(store_url, store_opt, store_wait);
  if (!store.ok()) return FailCommand("agent", store.status());
  opt.worker_env = StoreCredentialsEnv(store_opt);  // the workers open the rendezvous store too
  // Renewals get a handle of their own whose requests give up within lease/4: a request
  // lost in an outage (its TCP retransmissions back off past the outage's end) is
  // retried on a fresh connection well before the fence at 3/4 (elastic/lease_keeper.h).
  StoreOptions lease_opt = store_opt;
  lease_opt.request_timeout = std::clamp(opt.lease_ttl / 4, std::chrono::milliseconds(100), store_opt.request_timeout);
  auto lease_store = OpenStore(store_url, lease_opt);
  if (!lease_store.ok()) return FailCommand("agent", lease_store.status());
  opt.lease_store = lease_store.value();
  Agent agent(store.value(), opt);
  Result<AgentEnd> end = Status::Internal("the agent did not run");
  {
    TerminationNotice notice([&agent](int) { agent.Preempt(); }, TerminationNotice::Repeat::kSecondSignalKills);
    end = agent.Run();
  }  // a notice after the end: nothing to save
  if (!end.ok()) return FailCommand("agent", end.status());
  return end.value() == AgentEnd::kPreempted ? kExitPreempted : kExitSuccess;
}

int RunSubmitCommand(const std::vector<std::string>& all_args) {
  CLI::App app{"elastrain submit: submit a training job to a head"};
  // `-- PROGRAM ARGS`: the agents run the program (elastrain launch's job in a cluster).
  std::vector<std::string> args = all_args, program;
  const bool launched = SplitProgramArgs(&args, &program);
  ApiFlags api;
  bool wait = false;
  std::vector<std::string> config_args;
  if (Status st = RefuseTokenArgument(args); !st.ok()) return FailCommand("submit", st);
  api.Add(app);
  app.add_flag("--wait", wait, "wait for the job to end; exit with its outcome (0, 1, or 4 if stopped)");
  AddConfigArgs(app, &config_args);
  if (int rc = ParseArgs(app, "submit", args); rc >= 0) return rc;
  if (!api.run_dir.empty())
    return FailCommand("submit", Status::InvalidArgument("--run-dir: an embedded `elastrain train` takes no jobs; "
                                                         "submit to an `elastrain head` (--head URL)"));
  auto cfg = LoadConfigFromArgs(config_args);
  if (!cfg.ok()) return FailCommand("submit", cfg.status());
  // The program is looked up on the agents' hosts; here only its form is checked.
  if (launched) {
    if (Status st = SetLaunchProgram(program, &cfg.value()); !st.ok()) return FailCommand("submit", st);
  }
  auto target = api.Target();
  if (!target.ok()) return FailCommand("submit", target.status());
  const std::string ca = CaCertFrom(api.ca_cert);
  // Paths are the submitter's: make them absolute for the agents (a shared filesystem).
  std::error_code ec;
  for (std::string* p : {&cfg->base_output_directory, &cfg->dataset_path, &cfg->tokenizer_path})
    if (!p->empty() && !IsDatasetBlend(*p)) *p = fs::absolute(*p, ec).lexically_normal().string();
  if (IsDatasetBlend(cfg->dataset_path)) {  // "W1 PATH1 W2 PATH2": each path absolute
    auto sources = ParseDatasetPath(cfg->dataset_path);
    if (!sources.ok()) return FailCommand("submit", sources.status());
    std::string blend;
    for (const WeightedPath& w : *sources)
      blend += (blend.empty() ? "" : " ") + fmt::format("{} {}", w.weight, fs::absolute(w.path, ec).lexically_normal().string());
    cfg->dataset_path = blend;
  }
  auto res = CallApi(target.value(), ca, "POST", "/api/v1/jobs", {{"config_yaml", ConfigToYaml(cfg.value())}});
  if (!res.ok()) return FailApiCall("submit", res.status());
  auto submitted = DecodeSubmittedJob(target.value(), res.value());
  if (!submitted.ok()) return FailApiCall("submit", submitted.status());
  std::printf("submitted job %s (run directory %s)\n", submitted->job_id.c_str(), submitted->run_dir.c_str());
  std::fflush(stdout);
  if (!wait) return kExitSuccess;
  const std::string job = submitted->job_id;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto st = GetJobStatus(target.value(), ca);
    if (!st.ok() && st.status().code() == StatusCode::kCorruption) return FailApiCall("submit", st.status());
    if (!st.ok()) continue;  // the head may be restarting
    if (st->job != job) return FailCommand("submit", Status::Internal("the head now runs another job"));
    if (IsTerminal(st->state)) {
      std::printf("job %s %s: %s\n", job.c_str(), JobStateName(st->state), st->reason.c_str());
      return ExitCodeForJobState(st->state);
    }
  }
}

int RunStatusCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain status: the job's state, generation, world size, step and ranks"};
  ApiFlags api;
  bool json = false;
  if (Status st = RefuseTokenArgument(args); !st.ok()) return FailCommand("status", st);
  api.Add(app);
  app.add_flag("--json", json, "print the status as JSON");
  if (int rc = ParseArgs(app, "status", args); rc >= 0) return rc;
  auto target = api.Target();
  if (!target.ok()) return FailCommand("status", target.status());
  auto answer = CallApi(target.value(), CaCertFrom(api.ca_cert), "GET", "/api/v1/job");
  if (!answer.ok()) return FailApiCall("status", answer.status());
  auto st = DecodeJobStatus(target.value(), answer.value());  // --json too: only a readable status is printed
  if (!st.ok()) return FailApiCall("status", st.status());
  if (json) std::printf("%s\n", answer->dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  else PrintStatus(st.value());
  return kExitSuccess;
}

int RunStopCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain stop: save a checkpoint and stop the job"};
  ApiFlags api;
  if (Status st = RefuseTokenArgument(args); !st.ok()) return FailCommand("stop", st);
  api.Add(app);
  if (int rc = ParseArgs(app, "stop", args); rc >= 0) return rc;
  auto target = api.Target();
  if (!target.ok()) return FailCommand("stop", target.status());
  auto st = CallApi(target.value(), CaCertFrom(api.ca_cert), "POST", "/api/v1/stop");
  if (!st.ok()) return FailApiCall("stop", st.status());
  std::printf("stop requested: the job saves a checkpoint after its current step and ends STOPPED\n");
  return kExitSuccess;
}

}  // namespace elastrain
