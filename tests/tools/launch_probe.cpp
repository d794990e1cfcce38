// A program for `elastrain launch` tests that needs no torch: it "trains" by counting
// steps, speaks the channel through include/elastrain_worker.h when asked, and records
// what it saw. Usage:
//   launch_probe --out DIR [--steps N] [--step-ms M] [--report] [--exit-at STEP CODE]
// Each process writes DIR/env.<RANK>.<TORCHELASTIC_RESTART_COUNT> (its environment, one
// VAR=value per line) and appends "<step> <restart>" lines to DIR/steps.<RANK>. Rank 0
// keeps its progress in DIR/checkpoint (written atomically) and every rank resumes from
// it. SIGTERM or a stop request: it writes DIR/checkpoint and exits 0. With --report,
// the second half of each step's wait stands for a collective: marked as "barrier"
// number step - 1 (elastrain_collective), as a program that talks marks its own.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "../../include/elastrain_worker.h"

extern char** environ;

namespace {
volatile sig_atomic_t g_term = 0;
void OnTerm(int) { g_term = 1; }

std::string Env(const char* k) {
  const char* v = std::getenv(k);
  return v ? v : "";
}

long long ReadCheckpoint(const std::string& path) {
  std::ifstream in(path);
  long long s = 0;
  return (in >> s) ? s : 0;
}

void WriteCheckpoint(const std::string& path, long long step) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  { std::ofstream(tmp) << step << "\n"; }
  std::rename(tmp.c_str(), path.c_str());
}
}  // namespace

int main(int argc, char** argv) {
  std::string out;
  long long steps = 100, exit_at = -1;
  int step_ms = 50, exit_code = 1;
  bool report = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) out = argv[++i];
    else if (a == "--steps" && i + 1 < argc) steps = std::atoll(argv[++i]);
    else if (a == "--step-ms" && i + 1 < argc) step_ms = std::atoi(argv[++i]);
    else if (a == "--report") report = true;
    else if (a == "--exit-at" && i + 2 < argc) {
      exit_at = std::atoll(argv[++i]);
      exit_code = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "launch_probe: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (out.empty()) return 2;
  ::signal(SIGTERM, OnTerm);
  if (report) elastrain_connect();
  const std::string rank = Env("RANK"), restart = Env("TORCHELASTIC_RESTART_COUNT");
  {
    std::ofstream env(out + "/env." + rank + "." + restart);
    for (char** e = environ; *e; ++e) env << *e << "\n";
  }
  const std::string ckpt = out + "/checkpoint";
  long long step = ReadCheckpoint(ckpt);
  const long long start_step = step;
  std::printf("START rank=%s world=%s restart=%s resumed_from=%lld pid=%d\n", rank.c_str(), Env("WORLD_SIZE").c_str(),
              restart.c_str(), step, static_cast<int>(::getpid()));
  std::fflush(stdout);
  std::atomic<bool> done{false};
  std::thread beat([&] {
    while (!done) {
      elastrain_heartbeat();
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  });
  int code = 0;
  while (step < steps) {
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms - step_ms / 2));
    elastrain_collective(step - start_step, "barrier", 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms / 2));
    elastrain_collective(step - start_step, "barrier", 0);
    ++step;
    { std::ofstream(out + "/steps." + rank, std::ios::app) << step << " " << restart << "\n"; }
    elastrain_report_step(step, 1.0 / static_cast<double>(step), 64);
    if (rank == "0") WriteCheckpoint(ckpt, step);
    if (rank == "0") elastrain_checkpoint_committed(step, 0.001);
    if (step == exit_at) {
      code = exit_code;
      break;
    }
    const char* reason = nullptr;
    if (g_term || elastrain_stop_requested(&reason)) {
      std::printf("STOPPED rank=%s step=%lld reason=%s\n", rank.c_str(), step, g_term ? "SIGTERM" : reason);
      break;
    }
  }
  done = true;
  beat.join();
  std::fflush(stdout);
  return code;
}
