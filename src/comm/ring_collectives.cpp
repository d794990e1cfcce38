#include "comm/ring_collectives.h"

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cstring>

namespace elastrain::ring {

namespace {

// Slot prefixes, far from the small integers Gloo's own collectives use.
constexpr uint8_t kReduceScatterPrefix = 0xE5;
constexpr uint8_t kAllReducePrefix = 0xE7;
constexpr uint8_t kAllGatherPrefix = 0xE8;
constexpr uint8_t kBroadcastPrefix = 0xE9;
constexpr uint8_t kBarrierPrefix = 0xEA;

// Gloo's macro would put this file's build path into the message.
[[noreturn]] void Fail(const char* what) { throw gloo::IoException(what); }

int Mod(int a, int n) { return ((a % n) + n) % n; }

// Ring allreduce in pipelined segments. The buffer is cut into size * P equal segments
// (P >= 2, each at most kMaxSegmentBytes; the last ones may be short or empty); chunk c
// is segments [c*P, (c+1)*P). Reduce-scatter: at step s rank r sends its partial chunk
// r-s to the right and adds the left neighbour's partial chunk r-s-1 into its own, one
// segment per iteration; after size-1 steps chunk r+1 is complete here. All-gather: at
// step s rank r passes on complete chunk r+1-s and receives chunk r-s in place. Two
// iterations are in flight at once (a segment arrives while the previous one is added),
// on one slot per phase: Gloo completes one pair's operations on a slot in order. A
// segment sent at iteration i was received at iteration i-P <= i-2, already waited for.
// Chunk c is summed in one order for a given world size (rank c's values, then each next
// rank's own + the partial sum) and the all-gather copies bits: ranks end identical.
constexpr size_t kMaxSegmentBytes = size_t{1} << 20;

template <typename T>
void AllReduceSumImpl(const Call& call, T* data, size_t n) {
  const size_t size = static_cast<size_t>(call.ctx.size);
  const int r = call.ctx.rank;
  const int right = Mod(r + 1, call.ctx.size);
  const int left = Mod(r - 1, call.ctx.size);
  const size_t max_seg = std::max<size_t>(1, kMaxSegmentBytes / sizeof(T));
  const size_t per_rank = std::max<size_t>(2, ((n + max_seg - 1) / max_seg + size - 1) / size);
  const size_t seg = (n + size * per_rank - 1) / (size * per_rank);  // elements, >= 1
  // Segment j of chunk c: its first element and length (0 past the end).
  struct Seg {
    size_t first, len;
  };
  auto segment = [&](int c, size_t j) {
    const size_t first = (static_cast<size_t>(Mod(c, call.ctx.size)) * per_rank + j) * seg;
    return Seg{first, first >= n ? 0 : std::min(seg, n - first)};
  };
  const size_t iterations = (size - 1) * per_rank;
  std::vector<T> incoming(2 * seg);
  Buffer whole(call, data, n * sizeof(T));
  Buffer tmp(call, incoming.data(), incoming.size() * sizeof(T));
  // Phase 0, iteration i: send segment i%P of chunk first_send - i/P, receive the same
  // segment of chunk first_send - 1 - i/P.
  auto run_phase = [&](uint32_t phase, int first_send, bool reduce) {
    const uint64_t slot = StepSlot(phase == 0 ? kAllReducePrefix : kAllGatherPrefix, phase, call.tag);
    auto send_seg = [&](size_t i) { return segment(first_send - static_cast<int>(i / per_rank), i % per_rank); };
    auto recv_seg = [&](size_t i) { return segment(first_send - 1 - static_cast<int>(i / per_rank), i % per_rank); };
    for (size_t i = 0; i < iterations + 2; ++i) {
      if (i >= 2) {  // complete iteration i-2
        const Seg got = recv_seg(i - 2);
        if (got.len > 0) {
          (reduce ? tmp : whole).WaitRecv();
          if (reduce) {
            T* acc = data + got.first;
            const T* add = incoming.data() + ((i - 2) & 1) * seg;
            for (size_t e = 0; e < got.len; ++e) acc[e] += add[e];
          }
        }
        if (send_seg(i - 2).len > 0) whole.WaitSend();
      }
      if (i >= iterations) continue;
      const Seg want = recv_seg(i);
      if (want.len > 0) {
        if (reduce)
          tmp.Recv(left, slot, (i & 1) * seg * sizeof(T), want.len * sizeof(T));
        else
          whole.Recv(left, slot, want.first * sizeof(T), want.len * sizeof(T));
      }
      const Seg out = send_seg(i);
      if (out.len > 0) whole.Send(right, slot, out.first * sizeof(T), out.len * sizeof(T));
    }
  };
  run_phase(0, r, true);       // reduce-scatter: ends with every send and receive done
  run_phase(1, r + 1, false);  // all-gather
}

}  // namespace

std::chrono::milliseconds Remaining(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

void WaitList::Add(gloo::transport::UnboundBuffer* buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) Fail("the group was cancelled");
  waiting_.push_back(buffer);
}

void WaitList::Remove(gloo::transport::UnboundBuffer* buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), buffer), waiting_.end());
}

void WaitList::AbortAll() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  // Gloo keeps an abort until the next wait, so one that lands between two waits ends
  // the second.
  for (gloo::transport::UnboundBuffer* b : waiting_) {
    b->abortWaitRecv();
    b->abortWaitSend();
  }
}

bool WaitList::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

Buffer::Buffer(const Call& call, void* data, size_t bytes)
    : call_(call), buf_(call.ctx.createUnboundBuffer(data, bytes)) {
  call_.waits.Add(buf_.get());
}

Buffer::~Buffer() { call_.waits.Remove(buf_.get()); }

void Buffer::Send(int peer, uint64_t slot, size_t offset, size_t bytes) { buf_->send(peer, slot, offset, bytes); }

void Buffer::Recv(int peer, uint64_t slot, size_t offset, size_t bytes) { buf_->recv(peer, slot, offset, bytes); }

void Buffer::WaitSend() {
  if (!buf_->waitSend(Remaining(call_.deadline))) Fail("send aborted: the group was cancelled");
}

void Buffer::WaitRecv() {
  if (!buf_->waitRecv(Remaining(call_.deadline))) Fail("receive aborted: the group was cancelled");
}

uint64_t StepSlot(uint8_t prefix, uint32_t step, uint32_t tag) {
  return (uint64_t{prefix} << 56) | (uint64_t{step & 0xFFFFFFu} << 32) | tag;
}

void AllReduceSum(const Call& call, float* data, size_t n) { AllReduceSumImpl(call, data, n); }
void AllReduceSum(const Call& call, double* data, size_t n) { AllReduceSumImpl(call, data, n); }

// At step s rank r sends its partial chunk (r-s-1) mod n to the right and adds the left
// neighbour's partial chunk (r-s-2) mod n into its own; after n-1 steps chunk r holds the
// full sum. Each rank moves (n-1)*m floats each way.
void ReduceScatterSum(const Call& call, const float* in, float* out, size_t m) {
  const int n = call.ctx.size;
  const int r = call.ctx.rank;
  std::vector<float> work(in, in + static_cast<size_t>(n) * m);  // partial sums
  std::vector<float> incoming(m);
  Buffer work_buf(call, work.data(), work.size() * sizeof(float));
  Buffer in_buf(call, incoming.data(), m * sizeof(float));
  const int right = Mod(r + 1, n);
  const int left = Mod(r - 1, n);
  const size_t bytes = m * sizeof(float);
  for (int s = 0; s < n - 1; ++s) {
    const uint64_t slot = StepSlot(kReduceScatterPrefix, static_cast<uint32_t>(s), call.tag);
    const size_t send_chunk = static_cast<size_t>(Mod(r - s - 1, n));
    const size_t recv_chunk = static_cast<size_t>(Mod(r - s - 2, n));
    work_buf.Send(right, slot, send_chunk * bytes, bytes);
    in_buf.Recv(left, slot, 0, bytes);
    in_buf.WaitRecv();
    float* acc = work.data() + recv_chunk * m;
    for (size_t i = 0; i < m; ++i) acc[i] += incoming[i];
  }
  // A chunk sent is never written again, so the sends may finish in any order.
  for (int s = 0; s < n - 1; ++s) work_buf.WaitSend();
  std::memcpy(out, work.data() + static_cast<size_t>(r) * m, bytes);
}

void AllGather(const Call& call, const void* in, size_t bytes, void* out) {
  const int n = call.ctx.size;
  const int r = call.ctx.rank;
  char* blocks = static_cast<char*>(out);
  std::memcpy(blocks + static_cast<size_t>(r) * bytes, in, bytes);
  Buffer whole(call, blocks, static_cast<size_t>(n) * bytes);
  const int right = Mod(r + 1, n);
  const int left = Mod(r - 1, n);
  // At step s pass on block r-s (ours, then the one just received) and receive r-s-1.
  for (int s = 0; s < n - 1; ++s) {
    const uint64_t slot = StepSlot(kAllGatherPrefix, static_cast<uint32_t>(s), call.tag);
    whole.Send(right, slot, static_cast<size_t>(Mod(r - s, n)) * bytes, bytes);
    whole.Recv(left, slot, static_cast<size_t>(Mod(r - s - 1, n)) * bytes, bytes);
    whole.WaitRecv();
  }
  for (int s = 0; s < n - 1; ++s) whole.WaitSend();
}

// Binomial tree over ranks renumbered so that the root is 0: rank v receives from
// v - (its lowest set bit), then sends to v + 2^k for every 2^k below that bit.
void Broadcast(const Call& call, void* data, size_t bytes, int root) {
  const int n = call.ctx.size;
  const int v = Mod(call.ctx.rank - root, n);
  const uint64_t slot = StepSlot(kBroadcastPrefix, 0, call.tag);
  Buffer buf(call, data, bytes);
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if (v & mask) {
      buf.Recv(Mod(v - mask + root, n), slot, 0, bytes);
      buf.WaitRecv();
      break;
    }
  }
  int sends = 0;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask >= n) continue;
    buf.Send(Mod(v + mask + root, n), slot, 0, bytes);
    ++sends;
  }
  for (; sends > 0; --sends) buf.WaitSend();
}

// Dissemination: in round k rank r signals r + 2^k and waits for r - 2^k; after
// ceil(log2 n) rounds every rank has heard, directly or not, from every other.
void Barrier(const Call& call) {
  const int n = call.ctx.size;
  const int r = call.ctx.rank;
  char token = 1;
  char heard = 0;
  Buffer out(call, &token, 1);
  Buffer in(call, &heard, 1);
  uint32_t round = 0;
  for (int dist = 1; dist < n; dist <<= 1, ++round) {
    const uint64_t slot = StepSlot(kBarrierPrefix, round, call.tag);
    out.Send(Mod(r + dist, n), slot, 0, 1);
    in.Recv(Mod(r - dist, n), slot, 0, 1);
    in.WaitRecv();
    out.WaitSend();
  }
}

}  // namespace elastrain::ring
