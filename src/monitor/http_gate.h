// The accept gate in front of the control API's HTTP server (monitor/job_api.h): it owns
// the listening socket, reads each request on one event-loop thread, and hands only
// complete requests to a few worker threads, which answer them through httplib.
//
// Why: cpp-httplib 0.11 gives every accepted connection to one of 8 threads (an
// unbounded queue behind them) that waits for the request with a 5 s timeout per
// read() and no deadline for the whole request, with a listen backlog of 5. Ten
// connections sending a header byte every 3 s held every thread (authenticated clients
// timed out for 75 s), and ~1,000 idle connections took every descriptor. Here:
//  - a waiting connection (request not complete) costs a descriptor and its buffer,
//    never a thread; it is closed `request_seconds` after its accept (the whole request:
//    head and body);
//  - at most `max_connections` connections per server and `max_per_peer` per address
//    (monitor/connection_ledger.h): over a cap, the least recently active waiting
//    connection is closed, so that a client sending its request at once is always
//    served; the caps stay below the process's descriptor limit (a quarter of it);
//  - bodies up to `max_buffered_body` arrive before a worker sees the request, and
//    larger ones up to `max_drained_body` are read and discarded first (the API refuses
//    them, 413); a body larger still, "Expect: 100-continue" or chunked framing is handed
//    over with the head, and the worker's reads stop at the same deadline;
//  - a worker's answer must be written within `answer_seconds`;
//  - one request per connection: the gate closes it after the answer.
// TLS (SetTls) is done here too, in the event loop: the handshake is part of the
// request's deadline.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <httplib.h>

#include "common/status.h"

namespace elastrain {

struct GateLimits {
  size_t max_connections = 512;   // per server; also at most a quarter of RLIMIT_NOFILE
  size_t max_per_peer = 128;      // per client address; at most max_connections / 2
  double request_seconds = 10;    // accept -> request head and body read (TLS handshake included)
  double answer_seconds = 30;     // request read -> answer written
  size_t max_buffered_body = 1 << 20;  // bodies up to this are read before a worker is used
  // A larger declared body, up to this, is read and discarded by the gate before a worker
  // sees the request (the server refuses it, 413, and a client that sent it at once must
  // not be reset before it reads that); the worker reads zeros in its place.
  size_t max_drained_body = 16 << 20;
  size_t max_head_bytes = 64 << 10;    // a longer request head is answered 431 and closed
  int workers = 8;
};

// What the gate did, since Serve.
struct GateCounters {
  uint64_t accepted = 0;
  uint64_t answered = 0;   // handed to a worker
  uint64_t refused = 0;    // closed at once: over a cap with nothing to close in its place
  uint64_t evicted = 0;    // waiting connections closed to make room (caps, descriptors)
  uint64_t timed_out = 0;  // waiting connections past request_seconds
  uint64_t too_large = 0;  // request heads over max_head_bytes
};

// The request a worker thread is answering: its peer and first line as received (for
// log lines about a request httplib could not parse, whose Request is empty).
struct GateRequest {
  std::string peer;
  int peer_port = 0;
  std::string first_line;
};
// The request being answered on this thread; nullptr outside a handler.
const GateRequest* CurrentGateRequest();

class HttpGate {
 public:
  // Answers one request read from the stream; the gate closes the connection afterwards.
  // Called on the worker threads, concurrently.
  using Handler = std::function<void(httplib::Stream&)>;
  HttpGate(GateLimits limits, Handler handler);
  ~HttpGate();
  HttpGate(const HttpGate&) = delete;
  HttpGate& operator=(const HttpGate&) = delete;

  // Serve HTTPS with these PEM files; InvalidArgument naming them when they do not load.
  // Before Listen.
  Status SetTls(const std::string& cert_file, const std::string& key_file);
  // Binds host:port (0: any free port); the bound port. Unavailable naming the address
  // when it cannot bind (Listen may then be called again).
  Result<int> Listen(const std::string& host, int port);
  // Starts the event loop and the workers: connections are taken from here on. Once,
  // after Listen succeeded.
  void Serve();
  // Closes the listening socket and every connection; waits for the workers (each done
  // within its deadline). Idempotent.
  void Stop();
  GateCounters Counters() const;
  // The caps in force (after the descriptor limit is applied), once started.
  GateLimits limits() const { return limits_; }

 private:
  class Impl;
  GateLimits limits_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace elastrain
