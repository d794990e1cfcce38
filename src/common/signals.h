// Termination signals (SIGTERM, SIGINT) taken by one thread of their own.
//
// A signal handler runs on whichever thread the kernel picks, in the middle of whatever
// it was doing, and makes its blocking calls fail with EINTR. The workers' threads are
// inside oneDNN, Gloo and OpenMP, which are not written for that: a SIGTERM (a spot
// notice) that landed in a computing worker once corrupted its heap. So no thread takes
// these signals asynchronously: StartSignalThread, first thing in main, blocks them in
// the main thread (every thread created later inherits the mask) and starts a thread
// that waits for them with sigwaitinfo and calls the handler a command set, as an
// ordinary function on an ordinary thread (it may lock, log, notify).
//
// Without a handler a signal does what it would have done without this module: the
// process dies of it, or, if the process started with it ignored (a background job of
// a shell script ignores SIGINT), nothing. Child processes must clear the mask before
// exec (ResetSignalMaskInChild).
#pragma once

#include <atomic>
#include <functional>

namespace elastrain {

using SignalHandler = std::function<void(int sig)>;

// Blocks SIGTERM and SIGINT in the calling thread and starts the signal thread. Call it
// once, before any other thread exists.
void StartSignalThread();

// What `sig` (SIGTERM or SIGINT) does from now on; an empty handler restores the
// default. The handler runs on the signal thread and may call SetSignalHandler itself.
void SetSignalHandler(int sig, SignalHandler handler);

// The same handler (or the default, when empty) for both SIGTERM and SIGINT.
void SetTerminationHandler(const SignalHandler& handler);

// A handler that does nothing: the signal is ignored.
void IgnoreSignal(int sig);

// How a long-running command (train, head, agent) takes SIGTERM and SIGINT; the one
// helper they all use. While it lives, a signal calls `on_notice` on the signal thread
// (ask the agent to preempt, set a stop flag). With kSecondSignalKills the first signal
// also restores the default action, so a second one ends the process at once: the way
// out of a save that does not finish. Once destroyed, both signals are ignored: the
// work a notice would have saved is done, and the command is on its way out.
class TerminationNotice {
 public:
  enum class Repeat {
    kCallAgain,          // every signal calls on_notice (it must be idempotent)
    kSecondSignalKills,  // the first calls on_notice, a second one kills the process
  };
  TerminationNotice(SignalHandler on_notice, Repeat repeat);
  ~TerminationNotice();
  TerminationNotice(const TerminationNotice&) = delete;
  TerminationNotice& operator=(const TerminationNotice&) = delete;
};

// A worker's SIGTERM (a preemption notice) and SIGINT (ignored: its agent decides).
// While it lives, SIGTERM sets *flag and calls on_notice (wake the owner's loop); once
// destroyed, SIGTERM only sets *flag, so that a late notice touches nothing of the
// owner. `flag` must outlive the process (a global).
class WorkerNotice {
 public:
  WorkerNotice(std::atomic<bool>* flag, std::function<void()> on_notice);
  ~WorkerNotice();
  WorkerNotice(const WorkerNotice&) = delete;
  WorkerNotice& operator=(const WorkerNotice&) = delete;

 private:
  std::atomic<bool>* flag_;
};

// In a child between fork and exec (async-signal-safe): unblocks every signal, so that
// the program it runs starts with the usual mask.
void ResetSignalMaskInChild();

// Ignores SIGPIPE for the process (once; not if the program installed its own handler).
// Gloo writes with writev(2) and OpenSSL with write(2), neither with MSG_NOSIGNAL: a write
// to a peer that just closed raises SIGPIPE, whose default action kills the process
// before the error (EPIPE) can be reported. Workers must survive a dead peer to report
// it, and a client etcd refuses after the TLS handshake must live to say why.
void IgnoreSigpipeOnce();

}  // namespace elastrain
