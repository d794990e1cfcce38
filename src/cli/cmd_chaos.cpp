// `elastrain chaos`: rehearse failures of a running job (docs/faults.md).
//   elastrain chaos kill|hang --rank R | kill --hang --rank R | kill --host H   [--head URL | --run-dir DIR]
//   elastrain chaos slow --rank R --factor F [--seconds S] | unslow --rank R    [--head URL | --run-dir DIR]
//   elastrain chaos preempt --rank R [--seconds S]                              [--head URL | --run-dir DIR]
//   elastrain chaos replay TRACE [--time-scale X] [--seed N] [--wait-seconds S] [--end-seconds T] [--stop-at-end]
//                          [--head URL | --run-dir DIR]
//   elastrain chaos trace [--duration S] [--rate R] [--bursty ...] [--mix kill:2,preempt:1] [--output FILE]
// One action is one POST /api/v1/chaos; replay makes one per event of a failure trace
// (cost/failure_trace.h) at its time; trace writes a synthetic one.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/job_flags.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/json.h"
#include "cost/failure_trace.h"
#include "wire/exit_codes.h"
#include "wire/job_status.h"
#include "wire/protocol.h"
#include "wire/worker_vocab.h"

namespace elastrain {

namespace {

double MonotonicSeconds() { return SecondsSince(std::chrono::steady_clock::time_point{}); }

// `chaos ACTION --help`: that action's own page, its flags only (the parser below takes
// them all and says which goes with which).
int PrintChaosActionHelp(const std::string& action) {
  struct Page {
    const char* action;
    const char* what;
  };
  static constexpr Page kPages[] = {
      {"kill", "SIGKILL a rank's worker (--rank R: a failure the job recovers from), or lose a whole host, its "
               "agent and workers (--host H, cluster mode); with --hang, SIGSTOP instead, as `chaos hang`"},
      {"hang", "SIGSTOP a rank's worker: its heartbeats stop, the job finds it hung and recovers"},
      {"slow", "throttle a rank's CPU: it runs --factor times slower (a gray failure) for --seconds, or until "
               "`chaos unslow`"},
      {"unslow", "undo a `chaos slow` of a rank"},
      {"preempt", "a preemption notice to a rank's worker (SIGTERM: it saves and leaves within "
                  "preemption_notice_seconds); its slot is gone, and comes back after --seconds (spot capacity "
                  "reclaimed, then returned)"},
  };
  const Page* page = nullptr;
  for (const Page& p : kPages)
    if (action == p.action) page = &p;
  if (page == nullptr) return -1;
  CLI::App app{fmt::format("elastrain chaos {}: {} (docs/faults.md)", action, page->what)};
  app.name("elastrain chaos " + action);
  std::string str;
  int rank = -1;
  bool flag = false;
  double number = 0;
  app.add_option("--rank", rank, "the rank of the current generation")->required(action != "kill");
  if (action == "kill") {
    app.add_option("--host", str, "a whole host, its agent and workers (cluster mode); instead of --rank");
    app.add_flag("--hang", flag, "stop the rank (SIGSTOP) instead, as `chaos hang`");
  }
  if (action == "slow") {
    app.add_option("--factor", number, "the rank runs this many times slower, in (1, 100]")->required();
    app.add_option("--seconds", number, "unslowed after this long (default 0: until `chaos unslow`)");
  }
  if (action == "preempt")
    app.add_option("--seconds", number, "its slot returns after this long (default 0: never)");
  ApiFlags api;
  api.Add(app);
  std::printf("%s", app.help().c_str());
  return kExitSuccess;
}

// One chaos request as POST /api/v1/chaos takes it.
nlohmann::json ChaosBody(CommandAction action, int rank, const std::string& host, double factor, double seconds) {
  nlohmann::json body = {{"action", std::string(Name(action))}, {"rank", rank}, {"host", host}};
  if (action == CommandAction::kSlow) body["factor"] = factor;
  if (action == CommandAction::kSlow || action == CommandAction::kPreempt) body["seconds"] = seconds;
  return body;
}

int RunChaosAction(const std::vector<std::string>& args) {
  CLI::App app{"elastrain chaos: rehearse a failure of a running job (every way to inject one: docs/faults.md)"};
  ApiFlags api;
  std::string action, host;
  int rank = -1;
  bool hang = false;
  double factor = 0, seconds = 0;
  app.add_option("action", action,
                 "kill (SIGKILL) | hang (SIGSTOP) | slow (throttle its CPU) | unslow | preempt (a notice) | replay "
                 "TRACE | trace (write one)")
      ->required()
      ->check(CLI::IsMember({"kill", "hang", "slow", "unslow", "preempt"}));
  app.add_flag("--hang", hang, "with kill: stop the rank (SIGSTOP) instead, as `chaos hang`");
  app.add_option("--rank", rank, "the rank of the current generation");
  app.add_option("--host", host, "kill: a whole host, its agent and workers (cluster mode)");
  app.add_option("--factor", factor, "slow: the rank runs this many times slower, in (1, 100]");
  app.add_option("--seconds", seconds,
                 "slow: unslowed after this long (default 0: until `chaos unslow`); preempt: the slot returns after "
                 "this long (default 0: never)");
  api.Add(app);
  if (int rc = ParseArgs(app, "chaos", args); rc >= 0) return rc;
  if (hang) action = Name(CommandAction::kHang);
  if ((rank < 0) == host.empty())
    return FailCommand("chaos", Status::InvalidArgument("expected one of --rank R or --host H"));
  const auto parsed = Parse<CommandAction>(action);  // checked above
  if (!parsed.ok()) return FailCommand("chaos", parsed.status());
  if (!host.empty() && parsed.value() != CommandAction::kKill)
    return FailCommand("chaos", Status::InvalidArgument("--host goes with kill (a lost host), not " + action));
  const bool slow = parsed.value() == CommandAction::kSlow, preempt = parsed.value() == CommandAction::kPreempt;
  if (slow && !(factor > 1 && factor <= kMaxSlowFactor))
    return FailCommand("chaos", Status::InvalidArgument(fmt::format(
                                    "slow --factor {}: expected a number in (1, {}] (how many times slower)", factor,
                                    kMaxSlowFactor)));
  if ((slow || preempt) && !(seconds >= 0 && seconds <= kMaxSlowSeconds))
    return FailCommand("chaos", Status::InvalidArgument(fmt::format(
                                    "{} --seconds {}: expected 0 ({}) to {}", action.c_str(), seconds,
                                    slow ? "until unslow" : "the slot never returns", kMaxSlowSeconds)));
  if (!slow && factor != 0)
    return FailCommand("chaos", Status::InvalidArgument("--factor goes with slow, not " + action));
  if (!slow && !preempt && seconds != 0)
    return FailCommand("chaos", Status::InvalidArgument("--seconds goes with slow and preempt, not " + action));
  auto target = api.Target();
  if (!target.ok()) return FailCommand("chaos", target.status());
  const CommandAction sent = host.empty() ? parsed.value() : CommandAction::kHost;
  auto st = CallApi(target.value(), CaCertFrom(api.ca_cert), "POST", "/api/v1/chaos",
                    ChaosBody(sent, rank, host, factor, seconds));
  if (!st.ok()) return FailApiCall("chaos", st.status());
  std::string what = host.empty() ? fmt::format("rank {}", rank) : host;
  if (slow) what += fmt::format(" by {}x{}", factor, seconds > 0 ? fmt::format(" for {}s", seconds) : std::string());
  if (preempt) what += seconds > 0 ? fmt::format(", its slot back in {}s", seconds) : ", its slot gone";
  std::printf("chaos: %s %s\n", action.c_str(), what.c_str());
  return kExitSuccess;
}

// ---------------------------------------------------------------- replay
struct ReplayOptions {
  double time_scale = 1;     // trace seconds per real second
  uint64_t seed = 1;         // draws the "any" targets
  double wait_seconds = 120; // for the job to run (first event) and between generations
  double end_seconds = -1;   // trace time at which the replay ends (-1: its last event)
  bool stop_at_end = false;  // then `elastrain stop` the job
};

constexpr const char* kGoodputCategories[] = {"productive", "redone", "recovery", "checkpoint", "waiting",
                                              "initialisation"};

// The job's goodput so far (GET /api/v1/goodput: every second since it was submitted in
// one category, monitor/goodput.h), in lines; with `since` (an earlier answer), also the
// window between the two, whose categories are the differences.
std::string GoodputLines(const nlohmann::json& g, const nlohmann::json* since) {
  const double wall = LenientNumber(g, "wall_seconds");
  std::string out = fmt::format("goodput of the job so far: {:.1f}% of {:.1f}s (worker-seconds {:.1f}, {} recoveries, "
                                "{} steps redone)\n",
                                100 * LenientNumber(g, "goodput"), wall, LenientNumber(g, "worker_seconds"),
                                g.contains("recoveries") && g["recoveries"].is_array() ? g["recoveries"].size() : size_t{0},
                                LenientInteger(g, "redone_steps", 0));
  auto seconds = [](const nlohmann::json& j, const char* c) {
    return j.contains("seconds") && j["seconds"].is_object() ? LenientNumber(j["seconds"], c) : 0.0;
  };
  for (const char* c : kGoodputCategories) {
    const double v = seconds(g, c);
    out += fmt::format("  {:<15} {:9.2f}s {:6.1f}%\n", c, v, wall > 0 ? 100 * v / wall : 0.0);
  }
  if (since == nullptr) return out;
  const double window = wall - LenientNumber(*since, "wall_seconds");
  const double productive = seconds(g, "productive") - seconds(*since, "productive");
  out += fmt::format("goodput over the replay: {:.1f}% of {:.1f}s\n", window > 0 ? 100 * productive / window : 0.0,
                     window);
  for (const char* c : kGoodputCategories) {
    const double v = seconds(g, c) - seconds(*since, c);
    out += fmt::format("  {:<15} {:9.2f}s {:6.1f}%  (replay)\n", c, v, window > 0 ? 100 * v / window : 0.0);
  }
  return out;
}

// The job's status, once it runs a generation (a recovery in progress is waited for,
// up to `wait` seconds). nullopt with `*ended` set when the job is over.
Result<JobStatus> RunningStatus(const ApiTarget& target, const std::string& ca, double wait, bool* ended) {
  const double deadline = MonotonicSeconds() + wait;
  for (;;) {
    auto s = GetJobStatus(target, ca);
    if (s.ok()) {
      if (IsTerminal(s->state)) {
        *ended = true;
        return s;
      }
      if (s->state == JobState::kRunning && !s->ranks.empty()) return s;
    } else if (s.status().code() == StatusCode::kCorruption) {
      return s.status();
    }
    if (MonotonicSeconds() >= deadline)
      return s.ok() ? Status::DeadlineExceeded(fmt::format("the job did not run a generation within {}s (state {})",
                                                           wait, JobStateName(s->state)))
                    : s.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// The chaos request for `e` against the running generation of `s`; FailedPrecondition
// saying why when the event cannot apply (a rank beyond the world).
Result<nlohmann::json> RequestFor(const TraceEvent& e, const JobStatus& s, double scale, std::mt19937_64& rng) {
  if (e.action == TraceAction::kHostLoss) {
    std::string host = e.host;
    if (host == "any") {
      if (s.ranks.empty()) return Status::FailedPrecondition("no host runs a rank");
      std::vector<std::string> hosts;
      for (const JobStatusRank& r : s.ranks)
        if (std::find(hosts.begin(), hosts.end(), r.host) == hosts.end()) hosts.push_back(r.host);
      host = hosts[std::uniform_int_distribution<size_t>(0, hosts.size() - 1)(rng)];
    }
    return ChaosBody(CommandAction::kHost, -1, host, 0, 0);
  }
  if (s.world < 1) return Status::FailedPrecondition("no rank runs");
  int rank = e.rank;
  if (rank == kAnyRank) rank = std::uniform_int_distribution<int>(0, s.world - 1)(rng);
  if (rank >= s.world)
    return Status::FailedPrecondition(fmt::format("rank {}: generation {} has ranks 0..{}", rank, s.generation,
                                                  s.world - 1));
  const CommandAction a = e.action == TraceAction::kKill      ? CommandAction::kKill
                          : e.action == TraceAction::kHang    ? CommandAction::kHang
                          : e.action == TraceAction::kPreempt ? CommandAction::kPreempt
                          : e.action == TraceAction::kSlow    ? CommandAction::kSlow
                                                              : CommandAction::kUnslow;
  return ChaosBody(a, rank, "", e.factor, e.seconds / scale);
}

std::string Describe(const nlohmann::json& body) {
  const std::string action = body["action"].get<std::string>();
  std::string s = action == "host" ? "host_loss " + body["host"].get<std::string>()
                                   : fmt::format("{} rank {}", action, body["rank"].get<int>());
  if (body.contains("factor")) s += fmt::format(" by {}x", body["factor"].get<double>());
  if (body.contains("seconds") && body["seconds"].get<double>() > 0)
    s += fmt::format(fmt::runtime(action == "preempt" ? ", its slot back in {:.3g}s" : " for {:.3g}s"),
                     body["seconds"].get<double>());
  return s;
}

int RunChaosReplay(const std::vector<std::string>& args) {
  CLI::App app{"elastrain chaos replay: drive a running job through a failure trace, each event at its time "
               "(the format: docs/faults.md)"};
  app.name("elastrain chaos replay");
  ApiFlags api;
  std::string path;
  ReplayOptions o;
  app.add_option("trace", path, "the trace, CSV or JSON")->required();
  app.add_option("--time-scale", o.time_scale,
                 "trace seconds per real second (60: an hour of trace in a minute); durations scale too")
      ->check(CLI::Range(1e-3, 1e6));
  app.add_option("--seed", o.seed, "draws the ranks and hosts of the events whose target is any");
  app.add_option("--wait-seconds", o.wait_seconds,
                 "how long to wait for the job to run a generation, before the first event and during recoveries")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--end-seconds", o.end_seconds,
                 "the trace time at which the replay ends (default: its last event); then the job's goodput so far "
                 "is printed")
      ->check(CLI::Range(0.0, kMaxTraceSeconds));
  app.add_flag("--stop-at-end", o.stop_at_end, "then stop the job (it saves and ends STOPPED, as `elastrain stop`)");
  api.Add(app);
  if (int rc = ParseArgs(app, "chaos replay", args); rc >= 0) return rc;
  auto trace = LoadFailureTrace(path);
  if (!trace.ok()) return FailCommand("chaos replay", trace.status());
  const std::string ca = CaCertFrom(api.ca_cert);
  // An embedded job writes its head_url once it has started: wait for it as for a generation.
  Result<ApiTarget> target = api.Target();
  for (const double until = MonotonicSeconds() + o.wait_seconds; !target.ok() && MonotonicSeconds() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    target = api.Target();
  }
  if (!target.ok()) return FailCommand("chaos replay", target.status());
  bool ended = false;
  auto first = RunningStatus(target.value(), ca, o.wait_seconds, &ended);
  if (!first.ok()) return FailApiCall("chaos replay", first.status());
  if (ended) return FailCommand("chaos replay", Status::FailedPrecondition("the job is over before the first event"));
  std::printf("chaos replay: %zu events of %s at %gx, from now (job %s, generation %lld)\n", trace->size(),
              path.c_str(), o.time_scale, first->job.c_str(), static_cast<long long>(first->generation));
  std::fflush(stdout);
  // The job's time by category when the replay starts, so that the end can show the window.
  auto before = CallApi(target.value(), ca, "GET", "/api/v1/goodput");
  if (!before.ok()) return FailApiCall("chaos replay", before.status());
  std::mt19937_64 rng(o.seed);
  const double t0 = MonotonicSeconds();
  size_t done = 0, skipped = 0;
  for (size_t i = 0; i < trace->size(); ++i) {
    const TraceEvent& e = (*trace)[i];
    const double due = t0 + e.time_seconds / o.time_scale;
    if (double wait = due - MonotonicSeconds(); wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    auto s = RunningStatus(target.value(), ca, o.wait_seconds, &ended);
    if (ended) {
      std::printf("chaos replay: the job ended (%s) before event %zu at %gs; %zu events not replayed\n",
                  JobStateName(s->state), i + 1, e.time_seconds, trace->size() - i);
      break;
    }
    const double late = MonotonicSeconds() - due;
    auto body = s.ok() ? RequestFor(e, s.value(), o.time_scale, rng) : Result<nlohmann::json>(s.status());
    Status sent = body.ok() ? CallApi(target.value(), ca, "POST", "/api/v1/chaos", body.value()).status() : body.status();
    if (sent.code() == StatusCode::kCorruption) return FailApiCall("chaos replay", sent);
    std::string what = body.ok() ? Describe(body.value()) : std::string(ChoiceWord(kTraceActionChoices, e.action));
    if (e.action == TraceAction::kHostLoss && e.seconds > 0)  // the cloud's to bring, not the replayer's
      what += fmt::format(" (a replacement host due in {:.3g}s, from whoever replaces hosts)", e.seconds / o.time_scale);
    if (sent.ok()) ++done;
    else ++skipped;
    std::printf("  [%zu] t=%gs (+%.2fs) %s: %s\n", i + 1, e.time_seconds, std::max(0.0, late), what.c_str(),
                sent.ok() ? "requested" : ("skipped: " + sent.message()).c_str());
    std::fflush(stdout);
  }
  std::printf("chaos replay: %zu of %zu events requested, %zu skipped\n", done, trace->size(), skipped);
  if (ended) return kExitSuccess;
  const double end = o.end_seconds >= 0 ? o.end_seconds : trace->empty() ? 0.0 : trace->back().time_seconds;
  if (double wait = t0 + end / o.time_scale - MonotonicSeconds(); wait > 0)
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  auto after = CallApi(target.value(), ca, "GET", "/api/v1/goodput");
  if (!after.ok()) return FailApiCall("chaos replay", after.status());
  std::printf("chaos replay: ended at %gs of trace\n%s", end, GoodputLines(after.value(), &before.value()).c_str());
  if (o.stop_at_end) {
    auto st = CallApi(target.value(), ca, "POST", "/api/v1/stop");
    if (!st.ok()) return FailApiCall("chaos replay", st.status());
    std::printf("chaos replay: stop requested\n");
  }
  return kExitSuccess;
}

// ---------------------------------------------------------------- trace
int RunChaosTrace(const std::vector<std::string>& args) {
  CLI::App app{"elastrain chaos trace: write a synthetic failure trace (CSV) for `chaos replay` and "
               "`cost simulate --trace`"};
  app.name("elastrain chaos trace");
  TraceSpec s;
  std::string mix = "kill", output;
  app.add_option("--duration", s.duration_seconds, "seconds of history");
  app.add_option("--rate", s.rate_per_hour, "events per hour (bursts per hour with --bursty)");
  app.add_flag("--bursty", s.bursty, "events come in bursts");
  app.add_option("--burst-extra", s.burst_extra, "mean events a burst adds to its first (Poisson)");
  app.add_option("--burst-seconds", s.burst_seconds, "a burst's events fall within this window");
  app.add_option("--mix", mix, "event kinds and weights: kill:2,preempt:1,hang,slow,host_loss");
  app.add_option("--return-seconds", s.return_seconds, "a preempted slot comes back after this long");
  app.add_option("--slow-factor", s.slow_factor, "a slowdown's factor")->check(CLI::Range(1.001, 100.0));
  app.add_option("--slow-seconds", s.slow_seconds, "a slowdown's length");
  app.add_option("--seed", s.seed, "the same seed and flags give the same trace");
  app.add_option("--output", output, "write it here (default: stdout)");
  if (int rc = ParseArgs(app, "chaos trace", args); rc >= 0) return rc;
  auto m = ParseTraceMix(mix);
  if (!m.ok()) return FailCommand("chaos trace", m.status());
  s.mix = m.value();
  if (!(s.return_seconds >= 0 && s.return_seconds <= kMaxSlowSeconds && s.slow_seconds >= 0 &&
        s.slow_seconds <= kMaxSlowSeconds))
    return FailCommand("chaos trace", Status::InvalidArgument(fmt::format(
                                          "--return-seconds/--slow-seconds: expected 0 to {}", kMaxSlowSeconds)));
  auto events = GenerateFailureTrace(s);
  if (!events.ok()) return FailCommand("chaos trace", events.status());
  const std::string csv =
      fmt::format("# elastrain chaos trace: {} events, {} s, {} {}/h, mix {}, seed {}\n", events->size(),
                  s.duration_seconds, s.bursty ? "bursts" : "Poisson", s.rate_per_hour, mix, s.seed) +
      FailureTraceCsv(events.value());
  if (output.empty()) {
    std::fputs(csv.c_str(), stdout);
    return kExitSuccess;
  }
  if (Status st = WriteFileAtomic(output, csv); !st.ok()) return FailCommand("chaos trace", st);
  std::printf("chaos trace: %zu events written to %s\n", events->size(), output.c_str());
  return kExitSuccess;
}

}  // namespace

int RunChaosCommand(const std::vector<std::string>& args) {
  if (Status st = RefuseTokenArgument(args); !st.ok()) return FailCommand("chaos", st);
  if (!args.empty() && args[0] == "replay") return RunChaosReplay({args.begin() + 1, args.end()});
  if (!args.empty() && args[0] == "trace") return RunChaosTrace({args.begin() + 1, args.end()});
  const bool help = std::find(args.begin(), args.end(), "--help") != args.end() ||
                    std::find(args.begin(), args.end(), "-h") != args.end();
  if (help)  // an action named anywhere (`chaos --rank 1 kill --help` too): its own page
    for (const std::string& a : args)
      if (int rc = PrintChaosActionHelp(a); rc >= 0) return rc;
  return RunChaosAction(args);
}

}  // namespace elastrain
