#include "monitor/connection_ledger.h"

#include <algorithm>

#include <fmt/format.h>

namespace elastrain {

ConnectionLedger::ConnectionLedger(size_t max_total, size_t max_per_peer)
    : max_total_(std::max<size_t>(max_total, 1)), max_per_peer_(std::clamp<size_t>(max_per_peer, 1, max_total_)) {}

uint64_t ConnectionLedger::LeastActiveWaiting(const std::string& peer) const {
  uint64_t best = 0;
  double best_active = 0;
  for (const auto& [id, e] : entries_) {
    if (!e.waiting || (!peer.empty() && e.peer != peer)) continue;
    if (best == 0 || e.active < best_active) {
      best = id;
      best_active = e.active;
    }
  }
  return best;
}

void ConnectionLedger::Forget(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  auto p = per_peer_.find(it->second.peer);
  if (p != per_peer_.end() && --p->second == 0) per_peer_.erase(p);
  entries_.erase(it);
}

ConnectionLedger::Decision ConnectionLedger::Admit(uint64_t id, const std::string& peer, double now) {
  Decision d;
  if (PeerCount(peer) >= max_per_peer_) {
    d.evict = LeastActiveWaiting(peer);
    if (d.evict == 0) {
      d.reason = fmt::format("{} holds {} connections (the cap per address), all being answered", peer,
                             PeerCount(peer));
      return d;
    }
    d.reason = fmt::format("{} holds {} connections (the cap per address): its least active waiting one closed",
                           peer, PeerCount(peer));
  } else if (entries_.size() >= max_total_) {
    std::string busiest;
    size_t most = 0;
    for (const auto& [p, n] : per_peer_)
      if (n > most) {
        most = n;
        busiest = p;
      }
    d.evict = LeastActiveWaiting(busiest);
    if (d.evict == 0) d.evict = LeastActiveWaiting("");
    if (d.evict == 0) {
      d.reason = fmt::format("{} connections open (the cap), all being answered", entries_.size());
      return d;
    }
    d.reason = fmt::format("{} connections open (the cap): the least active waiting one of {} ({} connections) "
                           "closed",
                           entries_.size(), busiest, most);
  }
  if (d.evict != 0) Forget(d.evict);
  entries_[id] = Entry{peer, now, now, true};
  ++per_peer_[peer];
  d.admit = true;
  return d;
}

void ConnectionLedger::Progress(uint64_t id, double now) {
  if (auto it = entries_.find(id); it != entries_.end()) it->second.active = now;
}

void ConnectionLedger::Answering(uint64_t id) {
  if (auto it = entries_.find(id); it != entries_.end()) it->second.waiting = false;
}

void ConnectionLedger::Closed(uint64_t id) { Forget(id); }

std::vector<uint64_t> ConnectionLedger::Expired(double now, double deadline_seconds) const {
  std::vector<uint64_t> out;
  for (const auto& [id, e] : entries_)
    if (e.waiting && now - e.accepted > deadline_seconds) out.push_back(id);
  return out;
}

uint64_t ConnectionLedger::Victim() const { return LeastActiveWaiting(""); }

size_t ConnectionLedger::PeerCount(const std::string& peer) const {
  auto it = per_peer_.find(peer);
  return it == per_peer_.end() ? 0 : it->second;
}

}  // namespace elastrain
