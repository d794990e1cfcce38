// common/signals.h: SIGTERM and SIGINT reach the handler on the signal thread, never
// interrupt another thread's blocking call, and without a handler do what they would
// have done. Each case runs in a forked child (the module changes the process's mask).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/signals.h"
#include "test_wait.h"

namespace elastrain {
namespace {

// Runs `body` in a child; returns its wait status.
template <typename F>
int InChild(F body) {
  const pid_t pid = ::fork();
  if (pid == 0) _exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(Signals, HandlerRunsOnItsOwnThreadAndBlockingCallsAreNotInterrupted) {
  const int status = InChild([] {
    StartSignalThread();
    std::atomic<bool> ran{false};
    std::atomic<bool> other_thread{false};
    const std::thread::id main_id = std::this_thread::get_id();
    SetSignalHandler(SIGTERM, [&](int sig) {
      other_thread = std::this_thread::get_id() != main_id;
      ran = sig == SIGTERM;
    });
    int fds[2];
    if (::pipe(fds) != 0) return 10;
    ::kill(::getpid(), SIGTERM);
    // Nothing is ever written: a handler run on this thread would end the wait early
    // with EINTR; the signal thread leaves it to time out.
    pollfd p{fds[0], POLLIN, 0};
    const auto t0 = std::chrono::steady_clock::now();
    const int r = ::poll(&p, 1, 300);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r != 0) return 11;  // interrupted (-1, EINTR) or spurious
    if (waited < 0.29) return 12;
    if (!WaitUntil([&] { return ran.load(); })) return 13;
    if (!other_thread) return 14;
    return 0;
  });
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "11: poll interrupted, 12: returned early, 13: no handler call, "
                                       "14: handler on the main thread";
}

TEST(Signals, WithoutAHandlerTheProcessDiesOfTheSignal) {
  const int status = InChild([] {
    StartSignalThread();
    ::kill(::getpid(), SIGTERM);
    std::this_thread::sleep_for(std::chrono::seconds(5));
    return 0;
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(Signals, ClearingTheHandlerRestoresTheDefault) {
  const int status = InChild([] {
    StartSignalThread();
    std::atomic<int> calls{0};
    SetSignalHandler(SIGINT, [&](int) {
      ++calls;
      SetSignalHandler(SIGINT, nullptr);  // as `elastrain train` does: a second Ctrl-C kills
    });
    ::kill(::getpid(), SIGINT);
    if (!WaitUntil([&] { return calls.load() > 0; }) || calls != 1) return 20;
    ::kill(::getpid(), SIGINT);
    std::this_thread::sleep_for(std::chrono::seconds(5));
    return 21;
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status << " (20: the handler did not run)";
  EXPECT_EQ(WTERMSIG(status), SIGINT);
}

TEST(Signals, ASignalIgnoredAtStartStaysIgnored) {
  const int status = InChild([] {
    ::signal(SIGINT, SIG_IGN);  // as in a background job of a shell script
    StartSignalThread();
    ::kill(::getpid(), SIGINT);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return 0;
  });
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// The helper of the long-running commands: the first signal calls the notice, a second
// one ends the process (kSecondSignalKills); once the notice is gone, signals are ignored.
TEST(Signals, TerminationNoticeThenASecondSignalKills) {
  const int status = InChild([] {
    StartSignalThread();
    std::atomic<int> calls{0};
    TerminationNotice notice([&](int) { ++calls; }, TerminationNotice::Repeat::kSecondSignalKills);
    ::kill(::getpid(), SIGTERM);
    if (!WaitUntil([&] { return calls.load() > 0; }) || calls != 1) return 30;
    ::kill(::getpid(), SIGINT);
    std::this_thread::sleep_for(std::chrono::seconds(5));
    return 31;
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status << " (30: the notice did not run)";
  EXPECT_EQ(WTERMSIG(status), SIGINT);
}

TEST(Signals, TerminationNoticeCallsAgainAndIgnoresSignalsAfterItsEnd) {
  const int status = InChild([] {
    StartSignalThread();
    std::atomic<int> calls{0};
    {
      TerminationNotice notice([&](int) { ++calls; }, TerminationNotice::Repeat::kCallAgain);
      ::kill(::getpid(), SIGTERM);
      if (!WaitUntil([&] { return calls.load() == 1; })) return 40;
      ::kill(::getpid(), SIGINT);
      if (!WaitUntil([&] { return calls.load() == 2; })) return 41;
    }
    ::kill(::getpid(), SIGTERM);  // ignored: the process lives on, the notice is not called
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return calls == 2 ? 0 : 42;
  });
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "40, 41: a signal did not call the notice; 42: called after its end";
}

}  // namespace
}  // namespace elastrain
