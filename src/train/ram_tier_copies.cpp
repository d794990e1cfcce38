#include "train/ram_tier_copies.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "plan/mesh.h"
#include "common/clock.h"
#include "common/fault.h"
#include "common/log.h"

namespace elastrain {

namespace {
// What follows a copy's data: the step and the checksum of the three buffers.
struct Header {
  int64_t step = -1;
  uint64_t checksum = 0;
};
}  // namespace

bool RamTierActive(const Mesh& mesh, int64_t memory_snapshot_period) {
  return memory_snapshot_period > 0 && mesh.world_size() > 1 && (mesh.fsdp() > 1 || mesh.tensor() > 1);
}

RamTierCopies::~RamTierCopies() { Stop(std::chrono::milliseconds(0)); }

void RamTierCopies::Start(const Setup& setup, std::unique_ptr<ProcessGroup> group) {
  Stop(std::chrono::milliseconds(0));
  Clear();
  setup_ = setup;
  generation_ = setup.generation;
  group_ = std::move(group);
  broken_ = false;
  stats_ = {};
  for (auto [rank, shard] : setup.receive_from) held_[rank].first = shard;
  {
    std::lock_guard<std::mutex> lock(mu_);
    has_job_ = busy_ = quit_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void RamTierCopies::Send(int64_t step, const float* params, const float* adam_m, const float* adam_v) {
  if (!thread_.joinable()) return;
  Wait();
  std::lock_guard<std::mutex> lock(mu_);
  job_ = {step, params, adam_m, adam_v};
  has_job_ = true;
  cv_.notify_all();
}

double RamTierCopies::Wait() {
  if (!thread_.joinable()) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !has_job_ && !busy_; });
  const double waited = SecondsSince(t0);
  stats_.wait_seconds += waited;
  return waited;
}

void RamTierCopies::Stop(std::chrono::milliseconds grace) {
  if (!thread_.joinable()) return;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, grace, [&] { return !has_job_ && !busy_; })) {
      LOG_WARN("ram tier: the copy in flight did not finish within {} ms; cancelling it", grace.count());
      cancel_ = true;
    }
    quit_ = true;
    cv_.notify_all();
  }
  thread_.join();
  group_.reset();
  cancel_ = false;
  LOG_INFO("ram tier: generation {}: {} copies sent ({:.1f} MiB), {:.3f}s sending in the background, {:.3f}s "
           "waited by the trainer, {} failed exchange{}", generation_, stats_.snapshots, stats_.bytes_sent / 1048576.0,
           stats_.send_seconds, stats_.wait_seconds, stats_.failed, stats_.failed == 1 ? "" : "s");
}

void RamTierCopies::Clear() {
  held_.clear();
  own_step_ = -1;
  std::vector<float>().swap(own_);
  generation_ = -1;
}

std::vector<HeldCopy> RamTierCopies::Held() const {
  std::vector<HeldCopy> out;
  if (own_step_ >= 0) out.push_back({setup_.own_shard, own_step_});
  for (const auto& [rank, entry] : held_) {
    const auto& [shard, slot] = entry;
    if (auto c = slot.Complete()) out.push_back({shard, c->step});
    if (auto p = slot.Previous()) out.push_back({shard, p->step});
  }
  return out;
}

const float* RamTierCopies::Find(int shard, int64_t step, size_t* floats) const {
  *floats = 0;
  if (shard == setup_.own_shard && step == own_step_ && own_step_ >= 0) {
    *floats = own_.size();
    return own_.data();
  }
  for (const auto& [rank, entry] : held_) {
    const auto& [s, slot] = entry;
    if (s != shard) continue;
    for (auto v : {slot.Complete(), slot.Previous()})
      if (v && v->step == step && v->size == static_cast<size_t>(3 * setup_.shard_size)) {
        *floats = v->size;
        return v->data;
      }
  }
  return nullptr;
}

void RamTierCopies::Loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return has_job_ || quit_; });
      if (quit_ && !has_job_) return;
      job = job_;
      has_job_ = false;
      busy_ = true;
    }
    if (!broken_) Exchange(job);
    // Only after a copy went out whole: after a failed one, the own copy of the step
    // before may be the only one of this shard at a step every shard has.
    if (!broken_) KeepOwn(job);
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
    cv_.notify_all();
  }
}

void RamTierCopies::KeepOwn(const Job& job) {
  const size_t n = static_cast<size_t>(setup_.shard_size);
  own_step_ = -1;  // being overwritten
  own_.resize(3 * n);
  std::copy_n(job.p, n, own_.data());
  std::copy_n(job.m, n, own_.data() + n);
  std::copy_n(job.v, n, own_.data() + 2 * n);
  own_step_ = job.step;
}

void RamTierCopies::Exchange(const Job& job) {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t n = static_cast<size_t>(setup_.shard_size), bytes = n * sizeof(float);
  Header mine{job.step, SnapshotChecksum3(job.p, job.m, job.v, n)};
  std::vector<ProcessGroup::Transfer> sends, recvs;
  const bool kill = fault::Fires(fault::Point::kKillMidSnapshot,
                                 {.generation = setup_.generation, .rank = setup_.rank, .step = job.step});
  for (int b : setup_.send_to) {
    sends.push_back({b, const_cast<float*>(job.p), bytes});
    if (kill) continue;  // only the parameters go out: the buddy's copy is torn
    sends.push_back({b, const_cast<float*>(job.m), bytes});
    sends.push_back({b, const_cast<float*>(job.v), bytes});
    sends.push_back({b, &mine, sizeof(Header)});
  }
  std::vector<Header> headers(held_.size());
  if (!kill) {
    size_t i = 0;
    for (auto& [rank, entry] : held_) {
      float* dst = entry.second.Begin(job.step, 3 * n);
      for (int k = 0; k < 3; ++k) recvs.push_back({rank, dst + k * n, bytes});
      recvs.push_back({rank, &headers[i++], sizeof(Header)});
    }
  }
  const Status st = group_->Exchange(sends, recvs);
  if (kill) {
    LOG_WARN("fail_mode=kill_mid_snapshot: killing this rank halfway through its copy of step {} ({})", job.step,
             st.ok() ? "parameters sent" : st.message());
    fault::Crash();
  }
  // A copy counts only when its header arrived with this step and its bytes hash to the
  // sender's checksum; after a failed exchange some copies may still be whole.
  size_t i = 0;
  for (auto& [rank, entry] : held_) {
    SnapshotSlot& slot = entry.second;
    const Header& h = headers[i++];
    if (!slot.in_flight()) continue;
    if (h.step != job.step) {
      slot.Abandon();
      LOG_WARN("ram tier: the copy of step {} from rank {} did not arrive whole; keeping the last complete one",
               job.step, rank);
      continue;
    }
    const Status c = slot.Commit(h.checksum);
    if (!c.ok()) LOG_WARN("ram tier: rank {}'s copy: {}", rank, c.message());
  }
  stats_.send_seconds += SecondsSince(t0);
  if (st.ok()) {
    ++stats_.snapshots;
    stats_.bytes_sent += static_cast<int64_t>(sends.size() / 4 * (3 * bytes + sizeof(Header)));
    return;
  }
  ++stats_.failed;
  broken_ = true;
  LOG_WARN("ram tier: the copy of step {} failed, no more copies in this generation: {}", job.step, st.message());
}

}  // namespace elastrain
