#include "common/signals.h"

#include <pthread.h>
#include <signal.h>

#include <map>
#include <mutex>
#include <thread>

namespace elastrain {

namespace {

constexpr int kTaken[] = {SIGTERM, SIGINT};

std::mutex g_mu;
std::map<int, SignalHandler> g_handlers;  // GUARDED_BY(g_mu)
sigset_t g_ignored_at_start;              // written before the thread starts
pthread_t g_signal_thread;                // written before Forward is installed

sigset_t TakenSet() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kTaken) sigaddset(&set, s);
  return set;
}

// What the signal would have done without this module: ignored if the process started
// with it ignored, otherwise the process dies of it.
void DefaultAction(int sig) {
  if (sigismember(&g_ignored_at_start, sig)) return;
  ::signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(sig);  // delivered to this thread, now unblocked: the default action
}

void Loop(sigset_t set) {
  for (;;) {
    siginfo_t info;
    const int sig = ::sigwaitinfo(&set, &info);
    if (sig < 0) continue;  // EINTR (another signal's handler)
    SignalHandler h;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      auto it = g_handlers.find(sig);
      if (it != g_handlers.end()) h = it->second;
    }
    if (h) h(sig);
    else DefaultAction(sig);
  }
}

// Threads that a library started before main (OpenBLAS's pool starts at load time) do
// not block the signals, so one may be picked to take SIGTERM. This handler, run there,
// hands the signal on to the signal thread, which blocks it and so takes it with
// sigwaitinfo. pthread_kill is async-signal-safe.
void Forward(int sig) { ::pthread_kill(g_signal_thread, sig); }

}  // namespace

void StartSignalThread() {
  static std::once_flag once;
  std::call_once(once, [] {
    sigemptyset(&g_ignored_at_start);
    for (int s : kTaken) {
      struct sigaction old {};
      if (::sigaction(s, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) sigaddset(&g_ignored_at_start, s);
    }
    sigset_t set = TakenSet();
    ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread loop(Loop, set);
    g_signal_thread = loop.native_handle();
    loop.detach();
    for (int s : kTaken) {
      if (sigismember(&g_ignored_at_start, s)) continue;
      struct sigaction sa {};
      sa.sa_handler = Forward;
      sigfillset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART;
      ::sigaction(s, &sa, nullptr);
    }
  });
}

void SetSignalHandler(int sig, SignalHandler handler) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (handler) g_handlers[sig] = std::move(handler);
  else g_handlers.erase(sig);
}

void SetTerminationHandler(const SignalHandler& handler) {
  for (int sig : kTaken) SetSignalHandler(sig, handler);
}

void IgnoreSignal(int sig) {
  SetSignalHandler(sig, [](int) {});
}

TerminationNotice::TerminationNotice(SignalHandler on_notice, Repeat repeat) {
  if (repeat == Repeat::kCallAgain) {
    SetTerminationHandler(on_notice);
    return;
  }
  SetTerminationHandler([on_notice](int sig) {
    SetTerminationHandler(nullptr);  // before the notice: a second signal ends the process at once
    on_notice(sig);
  });
}

TerminationNotice::~TerminationNotice() {
  for (int sig : kTaken) IgnoreSignal(sig);
}

void ResetSignalMaskInChild() {
  // Forward's signal thread is not in the child: the defaults (or SIG_IGN) again.
  for (int s : kTaken)
    if (!sigismember(&g_ignored_at_start, s)) ::signal(s, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

void IgnoreSigpipeOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
      struct sigaction ign {};
      ign.sa_handler = SIG_IGN;
      sigemptyset(&ign.sa_mask);
      ::sigaction(SIGPIPE, &ign, nullptr);
    }
  });
}

WorkerNotice::WorkerNotice(std::atomic<bool>* flag, std::function<void()> on_notice) : flag_(flag) {
  SetSignalHandler(SIGTERM, [flag, on_notice = std::move(on_notice)](int) {
    *flag = true;
    if (on_notice) on_notice();
  });
  IgnoreSignal(SIGINT);
}

WorkerNotice::~WorkerNotice() {
  std::atomic<bool>* flag = flag_;
  SetSignalHandler(SIGTERM, [flag](int) { *flag = true; });
}

}  // namespace elastrain
