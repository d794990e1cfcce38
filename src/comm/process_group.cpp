#include "comm/process_group.h"

#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "comm/gloo_abort.h"
#include "comm/gloo_guard.h"
#include "comm/ring_collectives.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/signals.h"

namespace elastrain {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// One TCP device (one epoll thread) per bind address and process, shared by all groups.
// Weak references: the device lives as long as some group uses it. The pid check keeps
// a fork()ed child from reusing its parent's device, whose loop thread it does not have.
Result<std::shared_ptr<gloo::transport::Device>> TcpDeviceFor(const std::string& hostname) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<gloo::transport::Device>> devices;  // GUARDED_BY(mu)
  static pid_t owner = 0;                                                        // GUARDED_BY(mu)
  std::lock_guard<std::mutex> lock(mu);
  if (owner != getpid()) {
    devices.clear();
    owner = getpid();
  }
  if (auto dev = devices[hostname].lock()) return dev;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = hostname;
    std::shared_ptr<gloo::transport::Device> dev = gloo::transport::tcp::CreateDevice(attr);
    devices[hostname] = dev;
    return dev;
  } catch (const std::exception& e) {
    return Status::InvalidArgument("cannot bind a TCP device to hostname '" + hostname +
                                   "': " + e.what() +
                                   "; hint: pass an address of a local interface");
  }
}

bool MentionsTimeout(const std::string& what) {
  std::string lower(what);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.find("timeout") != std::string::npos || lower.find("timed out") != std::string::npos;
}

using ring::Remaining;

// Bounds every store call of connectFullMesh by one deadline, whatever timeout Gloo
// passes. Needed because Gloo (2022) calls store.get() on peers' "rank_<i>" keys before
// waiting for them, and FileStore::get then blocks for Store::kDefaultTimeout (30 s)
// regardless of the context's timeout. Waits are cut into slices so that a cancelled
// rendezvous (its generation is over: a peer will never come) gives up within a slice.
// It also masks this rank's pair addresses (key "<rank>") on their way to the store, so
// that every pair connects through the connection guard (comm/gloo_guard.h).
class DeadlineStore : public gloo::rendezvous::Store {
 public:
  DeadlineStore(gloo::rendezvous::Store& inner, Clock::time_point deadline, std::function<bool()> cancelled,
                const ConnectionGuard* guard, int rank)
      : inner_(inner), deadline_(deadline), cancelled_(std::move(cancelled)), guard_(guard),
        addresses_key_(std::to_string(rank)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    inner_.set(key, guard_ && key == addresses_key_ ? guard_->MaskAddresses(data) : data);
  }
  std::vector<char> get(const std::string& key) override {
    Wait({key});
    return inner_.get(key);
  }
  void wait(const std::vector<std::string>& keys) override { Wait(keys); }
  void wait(const std::vector<std::string>& keys, const milliseconds& /*timeout*/) override { Wait(keys); }

 private:
  static constexpr milliseconds kSlice{50};
  void Wait(const std::vector<std::string>& keys) {
    if (!cancelled_) return inner_.wait(keys, Remaining(deadline_));
    for (;;) {
      if (cancelled_()) GLOO_THROW_IO_EXCEPTION("rendezvous cancelled: the generation was aborted");
      const milliseconds left = Remaining(deadline_);
      try {
        return inner_.wait(keys, std::min(left, kSlice));
      } catch (const gloo::IoException&) {
        if (left <= kSlice) throw;  // the real deadline
      }
    }
  }
  gloo::rendezvous::Store& inner_;
  const Clock::time_point deadline_;
  const std::function<bool()> cancelled_;
  const ConnectionGuard* const guard_;
  const std::string addresses_key_;
};

std::string Sized(const char* op, size_t n) { return std::string(op) + "(n=" + std::to_string(n) + ")"; }

// A collective of `kind` on `tracker` (may be null) from construction to destruction,
// whichever way it ends.
class Inside {
 public:
  Inside(CollectiveTracker* tracker, CollectiveKind kind, Clock::time_point start) : tracker_(tracker), start_(start) {
    if (tracker_) tracker_->Enter(kind);
  }
  ~Inside() {
    if (tracker_) tracker_->Leave(Clock::now() - start_);
  }
  Inside(const Inside&) = delete;
  Inside& operator=(const Inside&) = delete;

 private:
  CollectiveTracker* const tracker_;
  const Clock::time_point start_;
};

}  // namespace

ProcessGroup::ProcessGroup(std::string prefix, int rank, int size, GroupOptions opt,
                           std::shared_ptr<gloo::Context> ctx)
    : prefix_(std::move(prefix)), rank_(rank), size_(size), opt_(std::move(opt)), ctx_(std::move(ctx)),
      tracker_(opt_.tracker) {
  if (ctx_ && opt_.cancelled) watcher_ = std::thread([this] { WatchForCancel(); });
}

// gloo::Context's destructor closes the pairs; the device outlives it if shared. The
// watcher touches the pairs, so it stops first.
ProcessGroup::~ProcessGroup() { StopWatcher(); }

void ProcessGroup::WatchForCancel() {
  std::unique_lock<std::mutex> lock(watcher_mu_);
  while (!watcher_stop_) {
    if (opt_.cancelled()) {
      cancelled_ = true;
      const std::string why = "group '" + prefix_ + "' cancelled: the generation was aborted";
      for (int r = 0; r < size_; ++r)
        if (r != rank_) FailGlooPair(ctx_->getPair(r).get(), why);
      waits_.AbortAll();
      return;
    }
    watcher_cv_.wait_for(lock, kCancelPoll, [this] { return watcher_stop_; });
  }
}

void ProcessGroup::StopWatcher() {
  if (!watcher_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(watcher_mu_);
    watcher_stop_ = true;
  }
  watcher_cv_.notify_all();
  watcher_.join();
}

Result<std::unique_ptr<ProcessGroup>> ProcessGroup::Connect(
    std::shared_ptr<gloo::rendezvous::Store> store, const std::string& prefix, int rank,
    int size, const GroupOptions& opt) {
  const std::string who = "group '" + prefix + "' rank " + std::to_string(rank) + " of " +
                          std::to_string(size);
  if (size < 1 || rank < 0 || rank >= size) {
    return Status::InvalidArgument("connecting " + who + ": expected size >= 1 and 0 <= rank < size");
  }
  if (opt.timeout <= milliseconds(0)) {
    return Status::InvalidArgument("connecting " + who + ": timeout=" +
                                   std::to_string(opt.timeout.count()) + " ms: expected > 0");
  }
  if (prefix.empty()) return Status::InvalidArgument("connecting " + who + ": empty prefix");
  if (size == 1) {  // nothing to talk to: every collective is a local no-op or copy
    return std::unique_ptr<ProcessGroup>(new ProcessGroup(prefix, rank, size, opt, nullptr));
  }
  if (!store) return Status::InvalidArgument("connecting " + who + ": null rendezvous store");
  IgnoreSigpipeOnce();
  ELASTRAIN_ASSIGN_OR_RETURN(auto device, TcpDeviceFor(opt.hostname));

  const auto start = Clock::now();
  Inside inside(opt.tracker, CollectiveKind::kConnect, start);
  std::string what;
  bool io_error = false;
  // No connection reaches a pair before it proves it comes from this group (gloo_guard.h):
  // the store phase and the connections each get `timeout`.
  ELASTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ConnectionGuard> guard,
                             ConnectionGuard::Open(opt.hostname, prefix, rank, size, start + 2 * opt.timeout,
                                                   opt.cancelled));
  try {
    gloo::rendezvous::PrefixStore prefixed(prefix, *store);
    DeadlineStore bounded(prefixed, start + opt.timeout, opt.cancelled, guard.get(), rank);
    bounded.set(ConnectionGuard::RecordKey(rank), guard->Record());
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      Status st = guard->AddPeer(peer, bounded.get(ConnectionGuard::RecordKey(peer)));
      if (!st.ok()) GLOO_THROW_IO_EXCEPTION(st.message());
    }
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    // The pairs inherit the context's timeout and allow 5x it for the TCP handshake with a
    // peer that published its address; a fifth keeps that step within opt.timeout too.
    // Collectives pass their own timeout, so this value bounds nothing else.
    ctx->setTimeout(std::max(opt.timeout / 5, milliseconds(1)));
    {
      ConnectionGuard::Active guarded(guard.get());
      ctx->connectFullMesh(bounded, device);
    }
    if (guard->pairs_connected() != size - 1)  // e.g. libgloo's connect did not reach the guard
      GLOO_THROW_IO_EXCEPTION("the connection guard saw ", guard->pairs_connected(), " of ", size - 1,
                              " pair connections");
    guard->Close();
    if (guard->refused() > 0)
      LOG_WARN("comm: {}: refused {} connection(s) that did not prove they came from the group", who,
               guard->refused());
    // A TCP handshake completes in the peer's kernel even if the peer dies before it
    // accepts, so a connected mesh does not yet prove every peer alive. One barrier does:
    // Connect succeeds only when all ranks got this far.
    ring::WaitList waits;  // no watcher yet: nothing aborts this one but its timeout
    ring::Barrier(ring::Call{*ctx, Clock::now() + opt.timeout, /*tag=*/0, waits});  // collectives' tags start at 1
    LOG_DEBUG("comm: connected {} in {} ms", who,
              std::chrono::duration_cast<milliseconds>(Clock::now() - start).count());
    return std::unique_ptr<ProcessGroup>(new ProcessGroup(prefix, rank, size, opt, std::move(ctx)));
  } catch (const gloo::IoException& e) {  // store timeouts, refused or timed-out handshakes
    what = e.what();
    io_error = true;
  } catch (const std::exception& e) {  // e.g. EnforceNotMet: the store refused a reused key
    what = e.what();
  }
  if (!guard->error().empty()) what += " (connection guard: " + guard->error() + ")";
  const auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  std::string msg = "connecting " + who + " failed after " + std::to_string(elapsed) +
                    " ms (timeout " + std::to_string(opt.timeout.count()) + " ms): " + what;
  if (opt.describe_lost_peers) {
    try {
      const std::string lost = opt.describe_lost_peers();
      if (!lost.empty()) msg += "; liveness: " + lost;
    } catch (const std::exception&) {  // a broken probe must not hide the real error
    }
  }
  msg += "; hint: every rank must connect with the same prefix and size, and a prefix "
         "must not be reused";
  LOG_WARN("comm: {}", msg);
  if (opt.cancelled && opt.cancelled()) return Status::Cancelled(msg);  // DeadlineStore gave up on the cancel
  if (MentionsTimeout(what)) return Status::DeadlineExceeded(msg);
  if (io_error) return Status::Unavailable(msg);
  return Status::FailedPrecondition(msg);
}

Status ProcessGroup::CheckUsable(const std::string& op) const {
  if (!broken()) return Status::OK();
  return Status::FailedPrecondition(op + " on group '" + prefix_ + "' rank " +
                                    std::to_string(rank_) + ": the group failed earlier (" +
                                    first_error_ + "); connect a new group under a new prefix");
}

template <typename Body>
Status ProcessGroup::Run(CollectiveKind kind, const std::string& op, Body&& body) {
  ELASTRAIN_RETURN_IF_ERROR(CheckUsable(op));
  const auto start = Clock::now();
  Inside inside(tracker_, kind, start);
  std::string what;
  bool io_error = false;
  try {
    body();
    busy_seconds_ += SecondsSince(start);
    return Status::OK();
  } catch (const gloo::IoException& e) {  // timeouts and closed/reset connections
    what = e.what();
    io_error = true;
  } catch (const gloo::EnforceNotMet& e) {  // a broken invariant inside Gloo
    what = e.what();
  } catch (const std::exception& e) {
    what = e.what();
  }
  const auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  std::string msg = op + " on group '" + prefix_ + "' rank " + std::to_string(rank_) + " of " +
                    std::to_string(size_) + " failed after " + std::to_string(elapsed) +
                    " ms (timeout " + std::to_string(opt_.timeout.count()) + " ms): " + what;
  if (opt_.describe_lost_peers) {
    try {
      const std::string lost = opt_.describe_lost_peers();
      if (!lost.empty()) msg += "; liveness: " + lost;
    } catch (const std::exception&) {  // a broken probe must not hide the real error
    }
  }
  // A peer's watcher may close the connection before ours fires: the code (kCancelled)
  // and the message say why either way.
  const bool cancelled = cancelled_ || (opt_.cancelled && opt_.cancelled());
  if (cancelled) msg += "; the group was cancelled (generation aborted)";
  first_error_ = msg;
  // Reset our connections so that ranks still waiting on us (or on a neighbour of the
  // lost peer) fail now instead of at their own timeout: a ring only notices the death of
  // its immediate neighbours.
  try {
    ctx_->closeConnections();
  } catch (const std::exception& e) {
    LOG_DEBUG("comm: closing connections of '{}': {}", prefix_, e.what());
  }
  LOG_WARN("comm: {}", msg);
  if (cancelled) return Status::Cancelled(msg);
  if (MentionsTimeout(what)) return Status::DeadlineExceeded(msg);
  if (io_error) return Status::Unavailable(msg);
  return Status::Internal(msg);
}

Status ProcessGroup::AllReduceSum(float* data, size_t n) {
  if (n > 0 && data == nullptr) return Status::InvalidArgument("AllReduceSum: null data");
  if (size_ == 1 || n == 0) return CheckUsable("AllReduceSum");
  return Run(CollectiveKind::kAllReduce, Sized("AllReduceSum", n),
             [&] { ring::AllReduceSum(NewCall(), data, n); });
}

Status ProcessGroup::AllReduceSum(double* data, size_t n) {
  if (n > 0 && data == nullptr) return Status::InvalidArgument("AllReduceSum: null data");
  if (size_ == 1 || n == 0) return CheckUsable("AllReduceSum");
  return Run(CollectiveKind::kAllReduce, Sized("AllReduceSum<double>", n),
             [&] { ring::AllReduceSum(NewCall(), data, n); });
}

Status ProcessGroup::AllReduceSumBucketed(float* data, size_t n, size_t bucket_elems) {
  if (bucket_elems == 0) return Status::InvalidArgument("AllReduceSumBucketed: bucket_elems=0: expected >= 1");
  if (n > 0 && data == nullptr) return Status::InvalidArgument("AllReduceSumBucketed: null data");
  if (size_ == 1 || n == 0) return CheckUsable("AllReduceSumBucketed");
  // Each bucket is its own collective with its own timeout: the timeout detects a stalled
  // peer, and a whole gradient in many buckets may rightly take longer than one bucket.
  for (size_t off = 0; off < n; off += bucket_elems) {
    const size_t len = std::min(bucket_elems, n - off);
    const std::string op = "AllReduceSumBucketed(n=" + std::to_string(n) + ", bucket at " +
                           std::to_string(off) + "+" + std::to_string(len) + ")";
    ELASTRAIN_RETURN_IF_ERROR(Run(CollectiveKind::kAllReduce, op,
                                  [&] { ring::AllReduceSum(NewCall(), data + off, len); }));
  }
  return Status::OK();
}

Status ProcessGroup::AllGatherBytes(const void* in, size_t n_per_rank, size_t elem_size,
                                    void* out, const char* op) {
  if (n_per_rank > 0 && (in == nullptr || out == nullptr)) {
    return Status::InvalidArgument(std::string(op) + ": null buffer");
  }
  if (n_per_rank == 0) return CheckUsable(op);
  const size_t bytes = n_per_rank * elem_size;
  if (size_ == 1) {
    ELASTRAIN_RETURN_IF_ERROR(CheckUsable(op));
    std::memcpy(out, in, bytes);
    return Status::OK();
  }
  return Run(CollectiveKind::kAllGather, Sized(op, n_per_rank), [&] {
    // Bytes: an all-gather only moves them, so one path serves every type.
    ring::AllGather(NewCall(), in, bytes, out);
  });
}

Status ProcessGroup::AllGather(const float* in, size_t n_per_rank, float* out) {
  return AllGatherBytes(in, n_per_rank, sizeof(float), out, "AllGather");
}

Status ProcessGroup::AllGather(const int64_t* in, size_t n_per_rank, int64_t* out) {
  return AllGatherBytes(in, n_per_rank, sizeof(int64_t), out, "AllGather<int64>");
}

Status ProcessGroup::ReduceScatterSum(const float* in, float* out, size_t n_per_rank) {
  if (n_per_rank > 0 && (in == nullptr || out == nullptr)) {
    return Status::InvalidArgument("ReduceScatterSum: null buffer");
  }
  if (n_per_rank == 0) return CheckUsable("ReduceScatterSum");
  if (size_ == 1) {
    ELASTRAIN_RETURN_IF_ERROR(CheckUsable("ReduceScatterSum"));
    std::memmove(out, in, n_per_rank * sizeof(float));
    return Status::OK();
  }
  return Run(CollectiveKind::kReduceScatter, Sized("ReduceScatterSum", n_per_rank),
             [&] { ring::ReduceScatterSum(NewCall(), in, out, n_per_rank); });
}

Status ProcessGroup::BroadcastBytes(void* data, size_t n, size_t elem_size, int root, const char* op) {
  if (root < 0 || root >= size_) {
    return Status::InvalidArgument(std::string(op) + " on group '" + prefix_ + "': root=" +
                                   std::to_string(root) + ": expected 0 <= root < " + std::to_string(size_));
  }
  if (n > 0 && data == nullptr) return Status::InvalidArgument(std::string(op) + ": null data");
  if (size_ == 1 || n == 0) return CheckUsable(op);
  return Run(CollectiveKind::kBroadcast, Sized(op, n) + " from root " + std::to_string(root), [&] {
    ring::Broadcast(NewCall(), data, n * elem_size, root);
  });
}

Status ProcessGroup::Broadcast(float* data, size_t n, int root) {
  return BroadcastBytes(data, n, sizeof(float), root, "Broadcast");
}

Status ProcessGroup::Broadcast(int64_t* data, size_t n, int root) {
  return BroadcastBytes(data, n, sizeof(int64_t), root, "Broadcast<int64>");
}

Status ProcessGroup::Barrier() {
  if (size_ == 1) return CheckUsable("Barrier");
  return Run(CollectiveKind::kBarrier, "Barrier", [&] {
    ring::Barrier(NewCall());
  });
}

// Exchange's slots: prefix, the pair's ordinal, the call's tag.
constexpr uint8_t kExchangeSlotPrefix = 0xE6;

Status ProcessGroup::Exchange(const std::vector<Transfer>& sends, const std::vector<Transfer>& recvs) {
  size_t total = 0;
  for (const auto* list : {&sends, &recvs})
    for (const Transfer& t : *list) {
      if (t.peer < 0 || t.peer >= size_ || t.peer == rank_)
        return Status::InvalidArgument(fmt::format("Exchange on group '{}': peer {}: expected another rank in [0, {})",
                                                   prefix_, t.peer, size_));
      if (t.bytes > 0 && t.data == nullptr) return Status::InvalidArgument("Exchange: null data");
      total += t.bytes;
    }
  if (size_ == 1) return CheckUsable("Exchange");
  const uint32_t tag = NextTag();
  const std::string op = fmt::format("Exchange({} sends, {} receives, {} bytes)", sends.size(), recvs.size(), total);
  return Run(CollectiveKind::kExchange, op, [&] {
    const ring::Call call{*ctx_, Clock::now() + opt_.timeout, tag, waits_};
    auto slot = [&](size_t ordinal) { return ring::StepSlot(kExchangeSlotPrefix, static_cast<uint32_t>(ordinal), tag); };
    std::vector<std::unique_ptr<ring::Buffer>> out, in;
    std::vector<size_t> ordinal(static_cast<size_t>(size_), 0);
    for (const Transfer& t : sends) {
      const size_t k = ordinal[t.peer]++;
      if (t.bytes == 0) continue;
      out.push_back(std::make_unique<ring::Buffer>(call, t.data, t.bytes));
      out.back()->Send(t.peer, slot(k), 0, t.bytes);
    }
    std::fill(ordinal.begin(), ordinal.end(), 0);
    for (const Transfer& t : recvs) {
      const size_t k = ordinal[t.peer]++;
      if (t.bytes == 0) continue;
      in.push_back(std::make_unique<ring::Buffer>(call, t.data, t.bytes));
      in.back()->Recv(t.peer, slot(k), 0, t.bytes);
    }
    for (auto& b : in) b->WaitRecv();
    for (auto& b : out) b->WaitSend();
  });
}

}  // namespace elastrain
