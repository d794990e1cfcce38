/* elastrain_worker.h: the optional channel between a program run by `elastrain launch`
 * and the elastrain worker that supervises it, for C and C++ programs (Python programs
 * use python/elastrain_worker.py). Header-only, POSIX, no other dependency: copy it
 * next to your sources. The protocol: src/wire/program_messages.h, docs/launch.md.
 *
 *   elastrain_connect();                        // once; 0 when not under elastrain
 *   ... each step: elastrain_report_step(step, loss, tokens);
 *       or, timed: elastrain_report_step_timed(step, loss, tokens, step_seconds, compute_seconds);
 *   ... a thread or the loop, every second: elastrain_heartbeat();
 *   ... after a checkpoint is durable: elastrain_checkpoint_committed(step, seconds);
 *   ... around each collective, for a hang's diagnosis:
 *       elastrain_collective(seq, "allreduce", 1); all_reduce(...); elastrain_collective(seq, "allreduce", 0);
 *   ... if (elastrain_stop_requested(NULL)) { save; exit(0); }
 *
 * Outside elastrain every call does nothing and returns 0. The functions are not
 * thread-safe with each other except elastrain_heartbeat, whose one write(2) of a short
 * line may interleave with nothing (lines under PIPE_BUF are written whole). */
#ifndef ELASTRAIN_WORKER_H_
#define ELASTRAIN_WORKER_H_

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static inline int elastrain_fd_ = -1;
static inline int elastrain_stop_ = 0;
static char elastrain_reason_[32];
static char elastrain_buf_[65536];
static size_t elastrain_len_ = 0;

/* One line, written whole; 0 on success. */
static inline int elastrain_send_(const char* line) {
  size_t off = 0, n = strlen(line);
  if (elastrain_fd_ < 0) return 0;
  while (off < n) {
    ssize_t w = send(elastrain_fd_, line + off, n - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    off += (size_t)w;
  }
  return 0;
}

/* Connects to the worker (ELASTRAIN_CHANNEL_FD) and says hello; 1 when connected. */
static inline int elastrain_connect(void) {
  const char* fd = getenv("ELASTRAIN_CHANNEL_FD");
  char line[128];
  if (elastrain_fd_ >= 0) return 1;
  if (!fd || !*fd || strspn(fd, "0123456789") != strlen(fd)) return 0;
  elastrain_fd_ = atoi(fd);
  if (fcntl(elastrain_fd_, F_GETFD) < 0) {
    elastrain_fd_ = -1;
    return 0;
  }
  snprintf(line, sizeof line, "{\"type\":\"hello\",\"pid\":%d,\"warm\":false}\n", (int)getpid());
  return elastrain_send_(line) == 0;
}

static inline int elastrain_connected(void) { return elastrain_fd_ >= 0; }

static inline int elastrain_heartbeat(void) { return elastrain_send_("{\"type\":\"heartbeat\"}\n"); }

/* tokens: tokens of the step over all ranks (0: unknown). */
static inline int elastrain_report_step(long long step, double loss, long long tokens) {
  char line[256];
  if (elastrain_fd_ < 0) return 0;
  snprintf(line, sizeof line, "{\"type\":\"step\",\"step\":%lld,\"loss\":%.17g,\"tokens\":%lld}\n", step, loss,
           tokens);
  return elastrain_send_(line);
}

/* The same, timed (the step anatomy by which elastrain finds a slow rank): step_seconds,
 * the step's duration, and compute_seconds, the part of it outside collectives (forward,
 * backward, update, its own I/O; at most step_seconds). A value outside [0, 1e9) is not
 * sent: without step_seconds the worker measures between reports, without
 * compute_seconds the whole step counts as compute. A loss that is not finite is left
 * out (JSON has no NaN); the step still counts. */
static inline int elastrain_report_step_timed(long long step, double loss, long long tokens, double step_seconds,
                                              double compute_seconds) {
  char line[256];
  size_t n;
  if (elastrain_fd_ < 0) return 0;
  n = (size_t)snprintf(line, sizeof line, "{\"type\":\"step\",\"step\":%lld,\"tokens\":%lld", step, tokens);
  if (loss == loss && loss > -1e300 && loss < 1e300 && n < sizeof line)
    n += (size_t)snprintf(line + n, sizeof line - n, ",\"loss\":%.17g", loss);
  if (step_seconds >= 0 && step_seconds < 1e9 && n < sizeof line) {
    n += (size_t)snprintf(line + n, sizeof line - n, ",\"step_seconds\":%.9f", step_seconds);
    if (compute_seconds > step_seconds) compute_seconds = step_seconds; /* rounding must not cost the report */
  }
  if (compute_seconds >= 0 && compute_seconds < 1e9 && n < sizeof line)
    n += (size_t)snprintf(line + n, sizeof line - n, ",\"compute_seconds\":%.9f", compute_seconds);
  if (n + 3 > sizeof line) return -1; /* cannot happen with the bounds above */
  memcpy(line + n, "}\n", 3);
  return elastrain_send_(line);
}

/* seconds: how long the save blocked training (0: unknown). */
static inline int elastrain_checkpoint_committed(long long step, double seconds) {
  char line[160];
  if (elastrain_fd_ < 0) return 0;
  snprintf(line, sizeof line, "{\"type\":\"checkpoint\",\"step\":%lld,\"seconds\":%.6f}\n", step, seconds);
  return elastrain_send_(line);
}

/* Collective `seq` (numbered from 0 in this process) of `kind` (allreduce, allgather,
 * reduce_scatter, broadcast, barrier, exchange or connect) entered (inside 1) or left
 * (inside 0). A hang's diagnosis names the rank behind by these. */
static inline int elastrain_collective(long long seq, const char* kind, int inside) {
  char line[160];
  if (elastrain_fd_ < 0) return 0;
  snprintf(line, sizeof line, "{\"type\":\"collective\",\"seq\":%lld,\"kind\":\"%.20s\",\"inside\":%s}\n", seq,
           kind ? kind : "", inside ? "true" : "false");
  return elastrain_send_(line);
}

/* Reads what the worker sent (without blocking). 1 when a stop is pending; its reason
 * ("resize", "user" or "preemption") goes to *reason when reason is not NULL. */
static inline int elastrain_stop_requested(const char** reason) {
  if (elastrain_fd_ < 0) return 0;
  for (;;) {
    ssize_t r = recv(elastrain_fd_, elastrain_buf_ + elastrain_len_, sizeof elastrain_buf_ - 1 - elastrain_len_,
                     MSG_DONTWAIT);
    if (r > 0) {
      elastrain_len_ += (size_t)r;
      if (elastrain_len_ >= sizeof elastrain_buf_ - 1) elastrain_len_ = 0; /* no line is this long */
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    break;
  }
  elastrain_buf_[elastrain_len_] = '\0';
  for (char* nl; (nl = strchr(elastrain_buf_, '\n')) != NULL;) {
    *nl = '\0';
    /* Only "control" lines matter here; a light scan suffices for their flat shape. */
    if (strstr(elastrain_buf_, "\"type\":\"control\"")) {
      const char* r = strstr(elastrain_buf_, "\"reason\":\"");
      elastrain_stop_ = strstr(elastrain_buf_, "\"stop\":true") != NULL;
      elastrain_reason_[0] = '\0';
      if (r) {
        size_t i = 0;
        r += 10;
        while (r[i] && r[i] != '"' && i + 1 < sizeof elastrain_reason_) {
          elastrain_reason_[i] = r[i];
          ++i;
        }
        elastrain_reason_[i] = '\0';
      }
    }
    elastrain_len_ -= (size_t)(nl + 1 - elastrain_buf_);
    memmove(elastrain_buf_, nl + 1, elastrain_len_ + 1);
  }
  if (reason) *reason = elastrain_reason_;
  return elastrain_stop_;
}

#endif /* ELASTRAIN_WORKER_H_ */
