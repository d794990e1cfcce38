#include "wire/protocol.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "wire/shared_records.h"
#include "wire/vocab_json.h"

namespace elastrain {

// Enums and small types travel by name (wire/vocab_json.h): an unknown name fails the
// whole record (named by Load).
// Missing fields keep their defaults, so records written by an older or newer version
// still load; integer fields take only JSON integers in range (common/json.h).
ELASTRAIN_JSON_RECORD(JobSpec, job_id, config_yaml, run_dir, submitted_at)
ELASTRAIN_JSON_RECORD(AgentInfo, id, host, address, slots, pid, started_at, preempting, health_checks)
ELASTRAIN_JSON_RECORD(HealthRecord, host, agent, healthy, check, reason, checked_at, expires_at, gemm_gflops,
                      memory_gbps)
ELASTRAIN_JSON_RECORD(WorkerRecord, id, slot, pid, phase, generation, rank, start_step, step,
                                                first_step_time, first_step_start, state_step, copies_generation, copies, train_phase, last_progress, last_step_time,
                                                checkpoint_step, compute_seconds, wait_seconds, timed_steps,
                                                timed_until_step, collective_seq, collective_kind, in_collective, outcome, stop_reasons, error, timed_out, exit_kind, exit_code,
                                                exit_signal, exit_time, exit_desc)
ELASTRAIN_JSON_RECORD(AgentReport, agent, time, workers)
ELASTRAIN_JSON_RECORD(PlanMember, rank, worker, agent, host, pid)
ELASTRAIN_JSON_RECORD(Plan, job_id, generation, world, data, fsdp, tensor, members, restore,
                                                rendezvous, inject_failure, created_at, failures, job_started_at,
                                                covered_failures)
ELASTRAIN_JSON_RECORD(JobControl, stop, requested_at)
ELASTRAIN_JSON_RECORD(GenerationStop, generation, reasons, abort, job_id)
ELASTRAIN_JSON_RECORD(AgentCommand, action, worker, requested_at, job_id, factor, seconds)
ELASTRAIN_JSON_RECORD(StragglerTrack, generation, slow_since_step, slow_since_time, last_step, detected, slowdown, rank, host)
ELASTRAIN_JSON_RECORD(JobRecord, job_id, state, reason, generation, world, failures, covered_failures,
                                                restarts, step, latest_checkpoint_step, started_at, updated_at,
                                                ended_at, wait_since, ending_since, resize_requested_gen,
                                                stop_sent_gen, kill_sent_gen, inject_armed, first_step_noted, state_since,
                                                trained_until, waited_since_trained, noted, host_failures,
                                                cooldown_until, stragglers, excluded_at, excluded_workers, host_healthy, hang_diagnosed_gen,
                                                last_recovery_seconds, health_asked_at, host_unplanned, planned_at, start_seconds,
                                                leader)
ELASTRAIN_JSON_RECORD(HeadRecord, id, host, pid, url, since)

namespace {
template <typename T>
std::string Dump(const T& v) {
  return nlohmann::json(v).dump();
}
template <typename T>
Status Load(const std::string& text, const char* what, T* v) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::Corruption(std::string(what) + ": expected a JSON object, got '" +
                                                text.substr(0, 80) + "'");
  try {
    *v = j.get<T>();
  } catch (const std::exception& e) {
    return Status::Corruption(std::string(what) + ": " + e.what());
  }
  return Status::OK();
}
}  // namespace

std::string ToJson(const JobSpec& v) { return Dump(v); }
std::string ToJson(const AgentInfo& v) { return Dump(v); }
std::string ToJson(const HealthRecord& v) { return Dump(v); }
std::string ToJson(const AgentReport& v) { return Dump(v); }
std::string ToJson(const Plan& v) { return Dump(v); }
std::string ToJson(const JobControl& v) { return Dump(v); }
std::string ToJson(const GenerationStop& v) { return Dump(v); }
std::string ToJson(const AgentCommand& v) { return Dump(v); }
std::string ToJson(const JobRecord& v) { return Dump(v); }
std::string ToJson(const HeadRecord& v) { return Dump(v); }
Status FromJson(const std::string& t, JobSpec* v) { return Load(t, "job spec", v); }
Status FromJson(const std::string& t, AgentInfo* v) { return Load(t, "agent record", v); }
Status FromJson(const std::string& t, HealthRecord* v) { return Load(t, "health record", v); }
Status FromJson(const std::string& t, AgentReport* v) { return Load(t, "agent report", v); }
Status FromJson(const std::string& t, Plan* v) { return Load(t, "generation plan", v); }
Status FromJson(const std::string& t, JobControl* v) { return Load(t, "job control", v); }
Status FromJson(const std::string& t, GenerationStop* v) { return Load(t, "generation stop", v); }
Status FromJson(const std::string& t, AgentCommand* v) { return Load(t, "agent command", v); }
Status FromJson(const std::string& t, JobRecord* v) { return Load(t, "job state", v); }
Status FromJson(const std::string& t, HeadRecord* v) { return Load(t, "head record", v); }

RendezvousAddress RendezvousForJob(const JobSpec& spec, const std::string& store_url) {
  if (IsEtcdRendezvousUrl(store_url)) return RendezvousAddress::Etcd(store_url, keys::Rendezvous(spec.job_id));
  return RendezvousAddress::File(spec.run_dir + "/rendezvous/" + spec.job_id);
}

}  // namespace elastrain
