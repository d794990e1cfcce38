// The RAM tier of a sharded generation (train/ram_tier_copies.h): its group, the restore
// from peers' RAM (train/peer_restore.h) and the snapshots after each update.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "plan/ram_tier.h"
#include "common/log.h"
#include "train/peer_restore.h"
#include "train/trainer_impl.h"
#include "wire/events.h"

namespace elastrain {

bool Trainer::RamTierWanted() const {
  return ctx_.carried != nullptr && RamTierActive(*mesh_, cfg_.memory_snapshot_period);
}

Status Trainer::ConnectRamTier(const std::shared_ptr<gloo::rendezvous::Store>& store) {
  if (!RamTierWanted()) return Status::OK();
  GroupOptions opt = GroupOpts();
  const RamTierCopies* ram = &ctx_.carried->ram;
  const std::function<bool()> aborted = ctx_.control.aborted;
  opt.cancelled = [ram, aborted] { return ram->cancelling() || (aborted && aborted()); };
  ELASTRAIN_ASSIGN_OR_RETURN(ram_group_,
                             ProcessGroup::Connect(store, ctx_.prefix + "/ram", ctx_.rank, ctx_.world, opt));
  return Status::OK();
}

Result<bool> Trainer::RestoreFromPeers() {
  const auto t0 = Clock::now();
  const RestoreSpec& r = ctx_.restore;
  CarriedState* carried = ctx_.carried;
  // The old mesh had at most max_workers ranks: a plan naming more shards is not this job's.
  if (r.sources.size() > static_cast<size_t>(std::max<int64_t>(cfg_.max_workers, 1)))
    return Status::InvalidArgument(fmt::format("restore from peers names {} shards; the job has at most "
                                               "max_workers={} ranks", r.sources.size(), cfg_.max_workers));
  ELASTRAIN_ASSIGN_OR_RETURN(const PeerRestorePlan plan,
                             PlanPeerRestore(cfg_.model, r.old_fsdp, r.old_tensor, *mesh_, r.sources));
  const int64_t n = plan.old_shard_size;
  // The shards this rank serves: its own old shard (the state it kept), or a copy it holds.
  struct Source {
    const float* b[3] = {nullptr, nullptr, nullptr};
  };
  std::map<int, Source> serve;
  std::string missing;
  TrainState* own = old_state_ ? old_state_.get() : rebound_ ? state_.get() : nullptr;
  for (int s = 0; s < static_cast<int>(r.sources.size()); ++s) {
    if (r.sources[s] != ctx_.rank) continue;
    Source src;
    if (own && carried && carried->shard_generation == r.old_generation && carried->shard_id == s &&
        carried->shard_step == r.step && own->shard_size() == n) {
      src = {{own->shard_params(), own->adam_m(), own->adam_v()}};
    } else if (carried && carried->ram.generation() == r.old_generation) {
      size_t floats = 0;
      if (const float* d = carried->ram.Find(s, r.step, &floats); d && floats == static_cast<size_t>(3 * n))
        src = {{d, d + n, d + 2 * n}};
    }
    if (!src.b[0]) missing += fmt::format("{}shard {}", missing.empty() ? "" : ", ", s);
    serve[s] = src;
  }
  // Every rank must serve what the plan says, or all fall back to the checkpoint together.
  const int64_t ok = missing.empty() ? 1 : 0;
  std::vector<int64_t> oks(ctx_.world, 1);
  ELASTRAIN_RETURN_IF_ERROR(world_->AllGather(&ok, 1, oks.data()));
  for (int q = 0; q < ctx_.world; ++q)
    if (!oks[q]) {
      const std::string why = fmt::format("rank {} does not hold {} at step {}", q,
                                          q == ctx_.rank ? missing : std::string("its shards"), r.step);
      LOG_WARN("restore from peers abandoned: {}; restoring the latest checkpoint", why);
      if (is_chief()) events_.Emit(PeerRestoreAbandonedEvent{ctx_.generation, why});
      return false;
    }

  // Pack what goes out (and what stays here) before anything is written: a rank may
  // serve its own old shard from the very state it restores into.
  std::vector<std::vector<float>> bufs(plan.transfers.size());
  std::vector<ProcessGroup::Transfer> sends, recvs;
  int64_t received = 0;
  for (size_t i = 0; i < plan.transfers.size(); ++i) {
    const PeerTransfer& t = plan.transfers[i];
    if (t.from != ctx_.rank && t.to != ctx_.rank) continue;
    const int64_t f = t.floats();
    bufs[i].resize(3 * f);
    if (t.from == ctx_.rank) {
      const Source& src = serve.at(t.shard);
      for (int k = 0; k < 3; ++k) {
        float* out = bufs[i].data() + k * f;
        for (const ShardRunCopy& c : t.runs) out = std::copy_n(src.b[k] + c.src, c.n, out);
      }
      if (t.to != ctx_.rank) sends.push_back({t.to, bufs[i].data(), bufs[i].size() * sizeof(float)});
    } else {
      recvs.push_back({t.from, bufs[i].data(), bufs[i].size() * sizeof(float)});
      received += 3 * f;
    }
  }
  state_step_ = -1;  // overwritten from here on
  if (carried && !old_state_) carried->shard_step = -1;  // a rebound state is the one overwritten
  ELASTRAIN_RETURN_IF_ERROR(world_->Exchange(sends, recvs));
  float* dst[3] = {state_->shard_params(), state_->adam_m(), state_->adam_v()};
  for (size_t i = 0; i < plan.transfers.size(); ++i) {
    const PeerTransfer& t = plan.transfers[i];
    if (t.to != ctx_.rank) continue;
    const int64_t f = t.floats();
    for (int k = 0; k < 3; ++k) {
      const float* in = bufs[i].data() + k * f;
      for (const ShardRunCopy& c : t.runs) {
        std::copy_n(in, c.n, dst[k] + c.dst);
        in += c.n;
      }
    }
  }
  old_state_.reset();
  state_step_ = r.step;
  start_step_ = r.step;
  const double secs = SecondsSince(t0);
  LOG_INFO("restored step {} from peers' RAM (generation {}'s {} shards onto mesh {}; received {:.1f} MiB) in {:.3f}s",
           r.step, r.old_generation, r.sources.size(), mesh_->ToString(), received * 4.0 / 1048576.0, secs);
  // The chief names where each shard came from; every rank's bytes add up in the log.
  if (is_chief()) {
    MemoryRestoredEvent e;
    e.step = r.step;
    e.generation = ctx_.generation;
    e.kind = "peers";
    e.old_generation = r.old_generation;
    e.old_mesh = {r.old_fsdp, r.old_tensor};
    for (size_t s = 0; s < r.sources.size(); ++s) e.sources.push_back({static_cast<int64_t>(s), r.sources[s]});
    e.seconds = secs;
    events_.Emit(e);
  }
  return true;
}

void Trainer::StartRamTier() {
  if (!ctx_.carried) return;
  RamTierCopies& ram = ctx_.carried->ram;
  if (!ram_group_) {  // no RAM tier in this generation: the old copies are of no more use
    ram.Stop(std::chrono::milliseconds(0));
    ram.Clear();
    return;
  }
  std::vector<std::string> hosts = ctx_.hosts;
  if (static_cast<int>(hosts.size()) != ctx_.world) hosts.assign(ctx_.world, "");
  const std::vector<std::vector<int>> buddies = BuddyRanks(hosts, static_cast<int>(cfg_.memory_snapshot_replicas));
  RamTierCopies::Setup setup;
  setup.generation = ctx_.generation;
  setup.own_shard = ShardId(coords_.fsdp, coords_.tensor, mesh_->tensor());
  setup.shard_size = state_->shard_size();
  setup.send_to = buddies[ctx_.rank];
  for (int q = 0; q < ctx_.world; ++q)
    for (int b : buddies[q])
      if (b == ctx_.rank) {
        const MeshCoords c = mesh_->Coords(q);
        setup.receive_from.push_back({q, ShardId(c.fsdp, c.tensor, mesh_->tensor())});
      }
  setup.rank = ctx_.rank;
  // From here its thread drives the group: its copies are not this rank's collectives.
  ram_group_->set_tracker(nullptr);
  ram.Start(setup, std::move(ram_group_));
  // The restored state is the first copy: a failure before the first update finds it.
  SnapshotToPeers(start_step_);
}

void Trainer::SnapshotToPeers(int64_t done) {
  if (!ctx_.carried || ctx_.carried->ram.generation() != ctx_.generation) return;
  // snapshot_period_ is the same on every rank (agreed in the step's collective): the
  // buddies exchange at the same steps. The restored state goes out whatever the period.
  const bool due = done == start_step_ || (snapshot_period_ > 0 && done % snapshot_period_ == 0);
  if (!due) return;
  ctx_.carried->ram.Send(done, state_->shard_params(), state_->adam_m(), state_->adam_v());
  copy_in_flight_ = true;
}

int64_t Trainer::DiskPeriodSteps() const {
  if (!cfg_.enable_checkpointing) return 0;
  return period_tuner_ ? period_tuner_->period() : cfg_.checkpoint_period;
}

void Trainer::StartSnapshotTuner() {
  snapshot_period_ = cfg_.memory_snapshot_period;
  if (!cfg_.memory_snapshot_period_auto || !RamTierWanted()) return;
  CarriedState* carried = ctx_.carried;
  if (carried->snapshot_tuner)
    snapshot_tuner_ = std::move(carried->snapshot_tuner);
  else
    snapshot_tuner_ = std::make_unique<SnapshotPeriodTuner>(cfg_.checkpoint_mtti_prior_seconds, cfg_.steps);
  NoteSnapshotPeriodChange(
      snapshot_tuner_->OnGenerationStart(ctx_.world, ctx_.failures, JobElapsedSeconds(), DiskPeriodSteps()),
      start_step_);
  // Until the first step's collective carries the chief's choice, this rank's own.
  snapshot_period_ = std::max<int64_t>(snapshot_tuner_->period(), 0);
}

void Trainer::NoteSnapshotPeriodChange(const std::optional<SnapshotPeriodChange>& c, int64_t step) {
  if (!c) return;
  // checkpoint_period=auto credits the RAM tier only while it keeps copies.
  if (period_tuner_) period_tuner_->SetRamTier(c->to != 0);
  if (!is_chief()) return;
  const std::string to = c->to == 0 ? std::string("off") : fmt::format("every {} steps", c->to);
  if (c->reason == "calibrating")
    LOG_INFO("memory_snapshot_period=auto: {} while the copy's cost is measured (step {})", to, step);
  else
    LOG_INFO("memory_snapshot_period=auto: {} after step {} ({}: copy {:.4f}s on a step of {:.4f}s, {} failure{}, "
             "MTTI {:.1f}s, disk checkpoint every {:.1f}s)",
             to, step, c->reason, c->copy_seconds, c->step_seconds, c->failures, c->failures == 1 ? "" : "s",
             c->mtti_seconds, c->disk_interval_seconds);
  events_.Emit(MemorySnapshotPeriodChangedEvent{c->from, c->to, c->failures, c->mtti_seconds, c->copy_seconds,
                                                c->step_seconds, c->disk_interval_seconds, c->reason,
                                                ctx_.generation, step});
}

}  // namespace elastrain
