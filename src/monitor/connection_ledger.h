// Who may hold a connection to the control API (monitor/http_gate.h), as a pure ledger:
// no sockets, no clock of its own, single-threaded (the gate guards it with its mutex).
//
// A connection is "waiting" from its accept until its request (head, and a small body)
// has arrived, then "answering" until it is closed. Waiting connections cost the server
// a descriptor and a buffer, never a thread. The caps:
//  - at most max_per_peer connections from one address: a connection over it closes
//    that address's least recently active waiting connection, or is refused when all of
//    them are being answered;
//  - at most max_total connections in all: a new one closes the least recently active
//    waiting connection of the address holding the most (the attacker's, as a rule),
//    or of any address, or is refused when every connection is being answered;
//  - a waiting connection past its deadline (Expired) is closed by the gate.
// "Least recently active" is the time of its last byte, or of its accept when it sent
// none: a client that sends its request at once (every real client) is answered within
// a round trip, long before the churn of an attacker's connections reaches it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace elastrain {

class ConnectionLedger {
 public:
  ConnectionLedger(size_t max_total, size_t max_per_peer);

  struct Decision {
    bool admit = false;
    uint64_t evict = 0;  // a waiting connection to close first; 0: none
    std::string reason;  // why one was closed or refused ("" when neither)
  };
  // A new connection `id` (> 0, unique) from `peer`: recorded when admitted (the evicted
  // one, if any, is forgotten here; the caller closes it).
  Decision Admit(uint64_t id, const std::string& peer, double now);
  // Bytes arrived on a waiting connection.
  void Progress(uint64_t id, double now);
  // The connection's request is complete: it is being answered and no longer evictable.
  void Answering(uint64_t id);
  void Closed(uint64_t id);
  // The waiting connections accepted before `now - deadline_seconds`.
  std::vector<uint64_t> Expired(double now, double deadline_seconds) const;
  // The least recently active waiting connection (the one to close when descriptors run
  // out); 0 when none waits.
  uint64_t Victim() const;

  size_t size() const { return entries_.size(); }
  size_t PeerCount(const std::string& peer) const;
  size_t max_total() const { return max_total_; }
  size_t max_per_peer() const { return max_per_peer_; }

 private:
  struct Entry {
    std::string peer;
    double accepted = 0;
    double active = 0;  // last byte, or accept
    bool waiting = true;
  };
  // The least recently active waiting connection of `peer` ("" : of any); 0: none.
  uint64_t LeastActiveWaiting(const std::string& peer) const;
  void Forget(uint64_t id);

  size_t max_total_, max_per_peer_;
  std::map<uint64_t, Entry> entries_;
  std::map<std::string, size_t> per_peer_;
};

}  // namespace elastrain
