#include "elastic/controller.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/files.h"
#include "common/safe_path.h"
#include "common/log.h"
#include "wire/events.h"
#include "wire/job_state.h"
#include "elastic/health_gate.h"
#include "elastic/leadership.h"
#include "elastic/policy.h"
#include "jobctl/cluster_view.h"
#include "common/events.h"
#include "config/derived.h"

namespace elastrain {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {
// The record as JSON without updated_at, which changes with every decision.
std::string RecordJsonWithoutTime(JobRecord r) {
  r.updated_at = 0;
  return ToJson(r);
}

// One readable line per event for the console; events.jsonl has every field.
std::string DescribeEvent(const AnyEvent& any) {
  if (const auto* e = std::get_if<JobStateEvent>(&any)) return fmt::format("{} -> {}: {}", e->from, e->to, e->reason);
  if (const auto* e = std::get_if<GenerationStartedEvent>(&any))
    return fmt::format("generation {}: {} workers, mesh data={} fsdp={} tensor={}, restore from {}", e->generation,
                       e->world, e->mesh.data, e->mesh.fsdp, e->mesh.tensor,
                       DescribeRestore(nlohmann::json(e->restore)));
  if (const auto* e = std::get_if<GenerationFirstStepEvent>(&any))
    return fmt::format("generation {}: first step done (step {})", e->generation, e->step);
  const nlohmann::json f = std::visit([](const auto& e) { return nlohmann::json(e); }, any);
  const auto reason = f.find("reason");
  if (reason != f.end() && reason->is_string())
    return fmt::format("{}: {}", EventName(any), reason->get<std::string>());
  return fmt::format("{} {}", EventName(any), f.dump());
}
}  // namespace

class Controller::Impl {
 public:
  Impl(std::shared_ptr<Store> store, ControllerOptions opt)
      : store_(std::move(store)), opt_(opt), lead_(store_, Me(opt_), opt_.leader_ttl) {
    if (opt_.spec_key) signed_spec_.emplace(opt_.spec_key, "controller");
  }
  Result<JobRecord> RunJob(const std::atomic<bool>& stop);

 private:
  static HeadRecord Me(const ControllerOptions& o) {
    HeadRecord me;
    me.id = o.head_id.empty() ? DefaultHeadId() : o.head_id;
    me.host = me.id.substr(0, me.id.rfind(':'));
    me.pid = ::getpid();
    me.url = o.head_url;
    return me;
  }
  // The job spec in the store; with opt_.spec_key, only one the head signed (else none).
  Result<std::optional<JobSpec>> ReadSpec();
  // A write of the leader (guarded by its key; Leadership::guard). FailedPrecondition
  // (kLostLead) when the key is no longer its own.
  Status LeaderPut(const std::string& key, const std::string& value);
  void AnnounceLead();
  Result<Observation> Observe(int64_t* plan_revision);
  // Carries out a decision; false when the plan's compare-and-swap lost (observe again).
  Result<bool> Apply(const Decision& d, int64_t plan_revision);
  void CleanUpRendezvous(int64_t below_generation);

  std::shared_ptr<Store> store_;
  ControllerOptions opt_;
  std::optional<SignedReader> signed_spec_;  // with opt_.spec_key
  Leadership lead_;
  double waited_for_lead_ = 0;
  JobSpec spec_;
  JobSettings settings_;
  JobRecord record_;
  std::string record_json_;   // the record as last written, updated_at left out
  int64_t record_put_revision_ = 0;  // store revision of Apply's record write; 0: none
  EventLog events_;
  int64_t command_serial_ = 0;
  std::set<std::string> warned_;  // Decision::warnings already logged
  std::map<std::string, std::string> refused_health_;  // key -> why, as last logged (once per change)
};

Status Controller::Impl::LeaderPut(const std::string& key, const std::string& value) {
  ELASTRAIN_ASSIGN_OR_RETURN(bool done, store_->PutIf({lead_.guard()}, key, value));
  if (done) return Status::OK();
  ELASTRAIN_RETURN_IF_ERROR(lead_.Verify());  // FailedPrecondition when the lead is gone
  return Status::Internal("controller: a guarded write of " + key + " failed while the lead held");
}

void Controller::Impl::AnnounceLead() {
  if (!opt_.announce_lead || record_.leader == lead_.me().id) return;
  if (!record_.leader.empty()) {
    HeadLostEvent lost;
    lost.head = record_.leader;
    lost.reason = "its lease ended; " + lead_.me().id + " leads";
    events_.Emit(lost);
    LOG_INFO("job {}: head_lost: {} ({})", spec_.job_id, lost.head, lost.reason);
  }
  HeadElectedEvent e;
  e.head = lead_.me().id;
  e.url = lead_.me().url;
  e.previous = record_.leader;
  e.waited_seconds = waited_for_lead_;
  events_.Emit(e);
  LOG_INFO("job {}: head_elected: {}{} (stood by {:.1f} s)", spec_.job_id, e.head,
           e.previous.empty() ? std::string() : ", after " + e.previous, e.waited_seconds);
}

Result<Observation> Controller::Impl::Observe(int64_t* plan_revision) {
  ELASTRAIN_ASSIGN_OR_RETURN(ClusterView view, ReadClusterView(*store_, spec_.job_id));
  Observation obs;
  obs.now = WallSeconds();
  auto add_reports = [&](std::vector<AgentReport>& reports, bool departed) {
    for (AgentReport& rep : reports) {
      if (!departed) obs.reported.push_back(rep.agent);
      for (WorkerRecord& w : rep.workers) {
        ObservedWorker ow;
        ow.rec = std::move(w);
        ow.agent = rep.agent;
        ow.host = view.HostOf(rep.agent);
        ow.departed = departed;
        obs.workers.push_back(std::move(ow));
      }
    }
  };
  add_reports(view.reports, false);
  add_reports(view.departed, true);
  obs.agents = std::move(view.agents);
  obs.plan = std::move(view.plan);
  *plan_revision = view.plan_revision;
  obs.stop_requested = view.stop_requested;
  ELASTRAIN_ASSIGN_OR_RETURN(std::vector<KeyValue> health, store_->List(keys::HealthPrefix()));
  obs.health = LoadHealthRecords(health, &refused_health_);
  return obs;
}

void Controller::Impl::CleanUpRendezvous(int64_t below) {
  // Keys of generations that are over would only accumulate.
  for (int64_t g = std::max<int64_t>(0, below - 3); g < below; ++g) {
    if (settings_.rendezvous.kind == RendezvousAddress::Kind::kFile) {
      std::error_code ec;
      fs::remove_all(fs::path(settings_.rendezvous.dir) / "gen" / std::to_string(g), ec);
    } else {
      (void)store_->DeletePrefix(fmt::format("{}/gen/{}/", keys::Rendezvous(spec_.job_id), g));
    }
  }
}

Result<bool> Controller::Impl::Apply(const Decision& d, int64_t plan_revision) {
  // Every write is guarded by the lead (a head that lost it writes nothing), and the
  // events follow the writes, so none is logged by a head that no longer leads.
  bool wrote = false;
  if (d.plan) {
    ELASTRAIN_ASSIGN_OR_RETURN(bool won, store_->PutIf({lead_.guard(), {keys::JobPlan(), plan_revision}},
                                                       keys::JobPlan(), ToJson(*d.plan)));
    if (!won) {
      ELASTRAIN_RETURN_IF_ERROR(lead_.Verify());
      LOG_WARN("controller: the plan changed under it; deciding again");
      return false;
    }
    wrote = true;
    (void)store_->DeletePrefix(keys::DepartedPrefix());  // read into this plan's decision
  }
  // Stops and commands carry the job's id (the policy stamps it): agents fence out others.
  if (d.stop) {
    ELASTRAIN_RETURN_IF_ERROR(LeaderPut(keys::GenerationStop(), ToJson(*d.stop)));
    wrote = true;
  }
  for (const auto& [agent, cmd] : d.commands) {
    ELASTRAIN_RETURN_IF_ERROR(LeaderPut(fmt::format("{}{:08d}", keys::CommandPrefix(agent), command_serial_++),
                                        ToJson(cmd)));
    wrote = true;
  }
  record_put_revision_ = 0;
  JobRecord next = d.record;
  next.leader = lead_.me().id;
  // Every decision stamps updated_at; a record that differs in nothing else is not
  // written again, or each write would wake this loop (and every agent) to decide again.
  const std::string json = RecordJsonWithoutTime(next);
  if (json != record_json_) {
    ELASTRAIN_ASSIGN_OR_RETURN(bool done, store_->PutIf({lead_.guard()}, keys::JobRecord(), ToJson(next)));
    if (!done) {
      ELASTRAIN_RETURN_IF_ERROR(lead_.Verify());
      return Status::Internal("controller: the guarded job record write failed while the lead held");
    }
    ELASTRAIN_ASSIGN_OR_RETURN(record_put_revision_, store_->Revision());
    record_json_ = json;
    wrote = true;
  }
  record_ = std::move(next);
  if (!d.events.empty() && !wrote) ELASTRAIN_RETURN_IF_ERROR(lead_.Verify());
  for (const AnyEvent& e : d.events) {
    std::visit([this](const auto& x) { events_.Emit(x); }, e);
    LOG_INFO("job {}: {}", spec_.job_id, DescribeEvent(e));
  }
  // Warnings repeat while their cause lasts (a refused record, every tick): each once.
  for (const std::string& w : d.warnings) {
    if (warned_.size() > 1000) warned_.clear();
    if (warned_.insert(w).second) LOG_WARN("job {}: {}", spec_.job_id, w);
  }
  if (d.plan) CleanUpRendezvous(d.plan->generation);
  return true;
}

Result<std::optional<JobSpec>> Controller::Impl::ReadSpec() {
  if (!signed_spec_) return ReadRecord<JobSpec>(*store_, keys::JobSpec());
  ELASTRAIN_ASSIGN_OR_RETURN(std::optional<KeyValue> kv, store_->Get(keys::JobSpec()));
  if (!kv || !signed_spec_->Accept(kv->key, kv->value)) return std::optional<JobSpec>();
  JobSpec spec;
  if (Status st = FromJson(kv->value, &spec); !st.ok()) return Status::Corruption(kv->key + ": " + st.message());
  return std::optional<JobSpec>(std::move(spec));
}

Result<JobRecord> Controller::Impl::RunJob(const std::atomic<bool>& stop) {
  ELASTRAIN_ASSIGN_OR_RETURN(waited_for_lead_, lead_.Acquire(stop));
  // Wait for a job.
  for (;;) {
    if (stop) return Status::Unavailable("controller stopped before a job was submitted");
    // The revision before the reads: a submission between them is not slept through.
    ELASTRAIN_ASSIGN_OR_RETURN(int64_t rev, store_->Revision());
    ELASTRAIN_ASSIGN_OR_RETURN(std::optional<JobSpec> spec, ReadSpec());
    ELASTRAIN_ASSIGN_OR_RETURN(std::optional<JobRecord> rec, ReadRecord<JobRecord>(*store_, keys::JobRecord()));
    const bool done = spec && rec && rec->job_id == spec->job_id && IsTerminal(rec->state);
    if (spec && !done) {
      spec_ = *spec;
      record_ = rec && rec->job_id == spec->job_id ? *rec : JobRecord();
      break;
    }
    ELASTRAIN_RETURN_IF_ERROR(lead_.Keep());
    // Wake at least three times per lease: an idle head keeps its leadership.
    (void)store_->WaitForChange(rev, std::min<std::chrono::milliseconds>(opt_.tick * 5, opt_.leader_ttl / 3));
  }
  const bool resumed = !record_.job_id.empty();
  record_.job_id = spec_.job_id;
  GuardDirectory(spec_.run_dir);  // nothing below it is reached through a link
  (void)MakeDirs(spec_.run_dir);
  // A job that cannot run at all (its run directory refused, its config unloadable)
  // ends FAILED with the reason, so that agents and the submitter see it end.
  const auto fail_job = [this](const Status& why) {
    record_.state = JobState::kFailed;
    record_.reason = why.message();
    LOG_ERROR("job {}: {}", spec_.job_id, record_.reason);
    (void)LeaderPut(keys::JobRecord(), ToJson(record_));
    return record_;
  };
  if (Status opened = events_.Open(spec_.run_dir + "/events.jsonl"); !opened.ok()) return fail_job(opened);
  if (Status logs = MakeLogsDirectory(spec_.run_dir); !logs.ok()) return fail_job(logs);
  auto cfg = LoadConfigText(spec_.config_yaml, "job " + spec_.job_id + " config");
  if (!cfg.ok()) return fail_job(cfg.status());
  const RendezvousAddress rendezvous = RendezvousForJob(spec_, store_->url());
  settings_ = SettingsFromConfig(cfg.value(), spec_.job_id, rendezvous);
  // One line per event, at the job's log_level, beside events.jsonl.
  SetLogLevel(cfg->log_level);
  AddLogFile(spec_.run_dir + "/controller.log");
  if (resumed) {
    ControllerResumedEvent e;
    e.job = spec_.job_id;
    e.state = JobStateName(record_.state);
    e.generation = record_.generation;
    e.step = record_.step;
    events_.Emit(e);
    LOG_INFO("controller: resuming job {} ({}, generation {}, step {})", spec_.job_id, JobStateName(record_.state),
             record_.generation, record_.step);
  } else {
    JobSubmittedEvent e;
    e.job = spec_.job_id;
    e.run_dir = spec_.run_dir;
    e.num_workers = cfg->num_workers_spec;
    e.max_failures = cfg->max_failures;
    e.global_batch_size = cfg->global_batch_size;
    events_.Emit(e);
    LOG_INFO("controller: job {} (num_workers={}, max_failures={}, run directory {})", spec_.job_id,
             cfg->num_workers_spec, cfg->max_failures, spec_.run_dir);
  }
  AnnounceLead();
  record_json_.clear();
  while (!stop) {
    ELASTRAIN_RETURN_IF_ERROR(lead_.Keep());
    ELASTRAIN_ASSIGN_OR_RETURN(int64_t rev, store_->Revision());
    int64_t plan_revision = 0;
    auto obs = Observe(&plan_revision);
    if (!obs.ok()) {
      LOG_WARN("controller: cannot read the store: {}", obs.status().message());
      std::this_thread::sleep_for(opt_.tick);
      continue;
    }
    const Decision d = Decide(record_, obs.value(), settings_);
    auto applied = Apply(d, plan_revision);
    if (!applied.ok() && applied.status().code() == StatusCode::kFailedPrecondition) return applied.status();
    if (!applied.ok()) {
      LOG_WARN("controller: cannot write the store: {}", applied.status().message());
      std::this_thread::sleep_for(opt_.tick);
      continue;
    }
    if (!applied.value()) continue;
    if (IsTerminal(record_.state)) {
      (void)store_->DeletePrefix(keys::Rendezvous(spec_.job_id) + "/");
      return record_;
    }
    if (d.plan || d.stop || !d.commands.empty()) continue;  // look again at once
    // The controller's own record write moved the revision by one; waiting from before
    // it would return at once and decide again on the same observation (a spin). Any
    // other change since Observe shows as a larger step: then decide again at once.
    if (record_put_revision_ != 0) {
      if (record_put_revision_ != rev + 1) continue;
      rev = record_put_revision_;
    }
    (void)store_->WaitForChange(rev, opt_.tick);
  }
  return record_;
}

Controller::Controller(std::shared_ptr<Store> store, ControllerOptions opt)
    : impl_(std::make_unique<Impl>(std::move(store), opt)) {}
Controller::~Controller() = default;
Result<JobRecord> Controller::RunJob(const std::atomic<bool>& stop) { return impl_->RunJob(stop); }

}  // namespace elastrain
