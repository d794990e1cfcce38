// The connection guard: no TCP connection reaches a Gloo pair before it has proved that it
// comes from a rank of the same group (comm-internal; ProcessGroup::Connect uses it).
//
// Why: Debian's Gloo (2022) gives every pair its own listening socket and takes the first
// connection that arrives on it as the peer, whoever opened it; its TLS transport is not
// built. A local user who connected to a worker's port during a rendezvous took the pair,
// and the generation failed. So elastrain makes every TCP connection of a pair itself:
//   1. Each rank opens one guard listener (GroupOptions::hostname, any port) and draws a
//      random 32-byte secret; it publishes both under the group's prefix in the rendezvous
//      store (a private run directory in embedded mode, authenticated etcd in cluster
//      mode: readable by the job only) and reads every peer's.
//   2. The pair addresses Gloo publishes are replaced by the zero address (0.0.0.0:0 or
//      [::]:0). Gloo makes the side with the greater address the connecting one, so every
//      pair now connects on both sides, and its connect(2) lands in this guard (the
//      process defines connect and listen; libgloo's calls resolve to them, see
//      gloo_guard.cpp). Gloo's own listening sockets get a socket filter that drops every
//      packet: nothing can connect to them before Gloo closes them.
//   3. For the pair (i, j) with i < j, rank i dials j's guard listener with Gloo's socket;
//      j sends a fresh nonce; i answers HMAC-SHA256(secret_j, prefix, i, j, nonce); j
//      answers HMAC-SHA256(secret_i, ...): each side has proved it read the other's secret.
//      Rank j then moves the accepted socket onto Gloo's (dup2). Connections that fail the
//      proof are refused and logged, one at a time and without holding anything up: the
//      listener serves every pending connection at once, each for kGuardProofTimeout.
// Ranks connect their pairs in rank order (Gloo's connectFullMesh), so a rank serves its
// listener exactly while lower ranks dial it: no wait cycle.
// What it does not do: encrypt or authenticate the bytes after the proof (Gloo has no
// TLS here); someone who can inject into a TCP stream on the path can still break it.
//
// Thread-safety: one guard belongs to one Connect call; Activate it on the thread that runs
// connectFullMesh. connect/listen of other threads, and of this thread to other addresses,
// pass through untouched.
#pragma once

#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace elastrain {

// How long a connection to a guard listener has to prove itself once the nonce is sent.
inline constexpr std::chrono::milliseconds kGuardProofTimeout{5000};
// Unproven connections a guard listener holds at once; beyond it the oldest is dropped.
inline constexpr size_t kGuardMaxPending = 64;

class ConnectionGuard {
 public:
  using Clock = std::chrono::steady_clock;
  // A guard for `rank` of `size` in group `prefix`, listening on `hostname`. Every wait
  // ends at `deadline` or when `cancelled` (may be empty) turns true.
  static Result<std::unique_ptr<ConnectionGuard>> Open(const std::string& hostname, const std::string& prefix,
                                                       int rank, int size, Clock::time_point deadline,
                                                       std::function<bool()> cancelled);
  ~ConnectionGuard();
  ConnectionGuard(const ConnectionGuard&) = delete;
  ConnectionGuard& operator=(const ConnectionGuard&) = delete;

  // This rank's record for the store (its listener's address and its secret), and a
  // peer's, checked (size and rank) before use.
  std::vector<char> Record() const;
  Status AddPeer(int peer, const std::vector<char>& record);
  // The store key of `rank`'s record (under the group's prefix).
  static std::string RecordKey(int rank) { return "elastrain_guard_" + std::to_string(rank); }
  // Gloo's published pair addresses (size-1 addresses of Gloo's tcp::Address) with every
  // address replaced by the zero address of its family; anything else unchanged.
  std::vector<char> MaskAddresses(const std::vector<char>& gloo_addresses) const;

  // While an Active lives, connect/listen of this thread go through this guard.
  class Active {
   public:
    explicit Active(ConnectionGuard* guard);
    ~Active();
    Active(const Active&) = delete;
    Active& operator=(const Active&) = delete;
  };

  // Once the pairs are connected: closes the listener, refusing (and counting) whatever
  // connected to it and is not a pair.
  void Close();

  // Why the last guarded connect failed ("" if none did), and how many connections the
  // listener refused.
  const std::string& error() const { return error_; }
  int refused() const { return refused_; }
  int pairs_connected() const { return pairs_connected_; }

  // The interposed calls (gloo_guard.cpp); -1 with errno on failure, as the libc calls.
  int OnConnect(int fd, const sockaddr* addr, socklen_t len);
  int OnListen(int fd, int backlog);

 private:
  struct Peer {
    bool known = false;
    sockaddr_storage addr{};
    socklen_t addr_len = 0;
    std::array<unsigned char, 32> secret{};
  };
  struct Pending {  // a connection to the listener that has not proved itself yet
    int fd = -1;
    std::string from;
    Clock::time_point until;
    std::array<unsigned char, 32> nonce{};
    std::vector<unsigned char> got;
  };
  ConnectionGuard(std::string prefix, int rank, int size, Clock::time_point deadline,
                  std::function<bool()> cancelled);
  int Fail(int err, std::string why);
  int Dial(int fd, int peer);
  int AcceptFrom(int fd, int peer);
  void TakeNew();
  // Reads what `p` sent; true when it is done with (proved: moved to proven_, or refused).
  bool Serve(Pending& p);
  void Refuse(Pending& p, const std::string& why);
  std::array<unsigned char, 32> Mac(const std::array<unsigned char, 32>& key, const char* label, int dialer,
                                    int acceptor, const std::array<unsigned char, 32>& nonce) const;

  const std::string prefix_;
  const int rank_;
  const int size_;
  const Clock::time_point deadline_;
  const std::function<bool()> cancelled_;
  int listener_ = -1;
  sockaddr_storage listen_addr_{};
  socklen_t listen_len_ = 0;
  std::array<unsigned char, 32> secret_{};
  std::vector<Peer> peers_;
  std::vector<Pending> pending_;
  std::map<int, int> proven_;  // dialer rank -> its proven connection, not yet given to Gloo
  int next_peer_ = 0;          // connectFullMesh connects peers in rank order
  std::string error_;
  int refused_ = 0;
  int pairs_connected_ = 0;
};

}  // namespace elastrain
