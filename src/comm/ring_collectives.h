// The process group's collectives, written over Gloo's unbound buffers so that another
// thread can end every wait (comm/process_group.h's cancel watcher).
//
// Gloo's own collectives (gloo::allreduce, broadcast, ...) create their buffers inside
// and wait on them until their timeout. When a pair fails, Gloo wakes the pair's pending
// receives and not-yet-started sends, but not a send it has begun to write (a peer that
// froze or died mid-transfer): that wait lasts the whole collective timeout (60 s by
// default), which is how a survivor of a killed worker could stall a recovery. Here every
// buffer a collective waits on is listed in a WaitList while it waits, and
// WaitList::AbortAll() ends those waits at once.
//
// Algorithms (each rank moves the same bytes Gloo's would, or fewer):
//   AllReduceSum    ring reduce-scatter then ring all-gather over `size` chunks; every
//                   chunk is summed in one fixed order, so all ranks end bit-identical;
//   ReduceScatterSum the same ring's first half, rank-major chunks of equal size;
//   AllGather       ring;
//   Broadcast       binomial tree from the root (log2(size) rounds);
//   Barrier         dissemination (log2(size) rounds of one byte).
// Each call is tagged (the group's next tag) and every step uses its own slot, so that no
// message of one collective or step can meet a receive of another.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo

namespace elastrain::ring {

using Clock = std::chrono::steady_clock;

// A wait must never receive 0 ms: Gloo reads 0 as "no timeout" and would block forever.
std::chrono::milliseconds Remaining(Clock::time_point deadline);

// The buffers some thread is waiting on; AbortAll (from any thread) ends their waits and
// every later registration fails, so an abort cannot slip in between two waits.
class WaitList {
 public:
  // Throws gloo::IoException when AbortAll already ran.
  void Add(gloo::transport::UnboundBuffer* buffer);
  void Remove(gloo::transport::UnboundBuffer* buffer);
  void AbortAll();
  bool aborted() const;

 private:
  mutable std::mutex mu_;
  std::vector<gloo::transport::UnboundBuffer*> waiting_;  // GUARDED_BY(mu_)
  bool aborted_ = false;                                   // GUARDED_BY(mu_)
};

// One collective call: the context, its end, its tag, and where its buffers register.
struct Call {
  gloo::Context& ctx;
  Clock::time_point deadline;
  uint32_t tag;
  WaitList& waits;
};

// A Gloo unbound buffer over caller memory, listed in the call's WaitList for its whole
// life. Send/Recv post; WaitSend/WaitRecv block until one posted operation completes and
// throw gloo::IoException when the call's deadline passes or the wait is aborted.
class Buffer {
 public:
  Buffer(const Call& call, void* data, size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void Send(int peer, uint64_t slot, size_t offset, size_t bytes);
  void Recv(int peer, uint64_t slot, size_t offset, size_t bytes);
  void WaitSend();
  void WaitRecv();

 private:
  const Call& call_;
  std::unique_ptr<gloo::transport::UnboundBuffer> buf_;
};

// Slot of a collective's step: kind prefix (top byte), step (24 bits), the call's tag.
uint64_t StepSlot(uint8_t prefix, uint32_t step, uint32_t tag);

// data (n): in-place sum over ranks; every rank ends with the same bits.
void AllReduceSum(const Call& call, float* data, size_t n);
void AllReduceSum(const Call& call, double* data, size_t n);
// in (size * m) -> out (m): out = sum over ranks of chunk `rank` of in.
void ReduceScatterSum(const Call& call, const float* in, float* out, size_t m);
// in (bytes) -> out (size * bytes), rank-major; in must not overlap out.
void AllGather(const Call& call, const void* in, size_t bytes, void* out);
// data (bytes): the root's bytes on every rank.
void Broadcast(const Call& call, void* data, size_t bytes, int root);
// Returns once every rank has entered.
void Barrier(const Call& call);

}  // namespace elastrain::ring
