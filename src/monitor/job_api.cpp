#include "monitor/job_api.h"

#include <httplib.h>

#include <deque>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/http_status.h"
#include "common/log.h"
#include "config/config.h"
#include "jobctl/cluster_view.h"
#include "jobctl/job_control.h"
#include "wire/protocol.h"
#include "monitor/dashboard.h"
#include "monitor/prometheus.h"
#include "jobctl/run_token.h"
#include "monitor/run_view.h"

namespace elastrain {

nlohmann::json ConfigStatusFields(const TrainConfig& cfg) {
  return {{"steps", cfg.steps},
          {"num_workers", cfg.num_workers_spec},
          {"max_failures", cfg.max_failures},
          {"checkpoint_period", cfg.checkpoint_period},
          {"cost_per_worker_hour", cfg.cost_per_worker_hour},
          {"model_name", cfg.model.name}};
}

Result<nlohmann::json> JobStatusJson(Store& store) {
  ELASTRAIN_ASSIGN_OR_RETURN(JobView v, ReadJobView(store));
  auto cfg = LoadConfigText(v.spec.config_yaml, "job config");
  nlohmann::json j;
  j["job"] = v.spec.job_id;
  j["run_dir"] = v.spec.run_dir;
  j.update(cfg.ok() ? ConfigStatusFields(cfg.value())
                     : nlohmann::json{{"steps", 0}, {"num_workers", ""}, {"max_failures", 0}, {"checkpoint_period", 0},
                                      {"cost_per_worker_hour", 0.0}, {"model_name", ""}});
  const JobRecord rec = v.cluster.record.value_or(JobRecord());
  j["state"] = JobStateName(rec.state);
  j["reason"] = rec.reason;
  j["generation"] = rec.generation;
  j["world"] = rec.world;
  j["step"] = rec.step;
  j["failures"] = rec.failures;
  j["restarts"] = rec.restarts;
  j["latest_checkpoint_step"] = rec.latest_checkpoint_step;
  j["started_at"] = rec.started_at;
  j["ended_at"] = rec.ended_at;
  nlohmann::json agents = nlohmann::json::array();
  for (const AgentInfo& a : v.cluster.agents) {
    agents.push_back({{"id", a.id}, {"host", a.host}, {"slots", a.slots}, {"preempting", a.preempting}});
  }
  j["agents"] = agents;
  nlohmann::json ranks = nlohmann::json::array();
  const auto workers = v.cluster.Workers();
  if (v.cluster.plan) {
    for (const PlanMember& m : v.cluster.plan->members) {
      nlohmann::json r = {{"rank", m.rank}, {"host", m.host}, {"agent", m.agent}, {"worker", m.worker},
                          {"pid", m.pid}, {"step", -1}, {"phase", "unknown"}};
      for (const auto& [agent, w] : workers)
        if (w.id == m.worker) {
          r["step"] = w.step;
          r["phase"] = w.phase == WorkerPhase::kRunning ? Name(w.train_phase) : Name(w.phase);
        }
      ranks.push_back(r);
    }
  }
  j["ranks"] = ranks;
  int idle = 0;
  for (const auto& [agent, w] : workers) idle += w.phase == WorkerPhase::kIdle ? 1 : 0;
  j["idle_workers"] = idle;
  return j;
}

Result<nlohmann::json> JobEventsJson(Store& store, size_t max_events) {
  ELASTRAIN_ASSIGN_OR_RETURN(JobView v, ReadJobView(store));
  std::ifstream in(v.spec.run_dir + "/events.jsonl");
  std::deque<nlohmann::json> last;
  std::string line;
  while (std::getline(in, line)) {
    auto e = nlohmann::json::parse(line, nullptr, false);
    if (e.is_discarded()) continue;
    last.push_back(std::move(e));
    if (last.size() > max_events) last.pop_front();
  }
  return nlohmann::json(std::vector<nlohmann::json>(last.begin(), last.end()));
}

class JobApiServer::Impl {
 public:
  Impl(std::shared_ptr<Store> store, bool embedded) : store_(std::move(store)), embedded_(embedded) {}
  ~Impl() { Stop(); }
  Result<std::string> Start(const std::string& host, int port);
  void Stop() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  static void Reply(httplib::Response& res, const Status& st, const nlohmann::json& ok_body) {
    if (st.ok()) {
      res.set_content(ok_body.dump(), "application/json");
      return;
    }
    res.status = HttpStatusFor(st);
    res.set_content(nlohmann::json{{"error", st.message()}}.dump(), "application/json");
  }
  void Routes();
  // The current job's status and run files; an empty status when no job was submitted.
  nlohmann::json Current(RunSnapshot* run);
  // 401 unless the request carries the run's bearer token.
  bool Authorized(const httplib::Request& req, httplib::Response& res);

  std::shared_ptr<Store> store_;
  RunView view_;
  const bool embedded_;
  httplib::Server server_;
  std::thread thread_;
};

nlohmann::json JobApiServer::Impl::Current(RunSnapshot* run) {
  auto j = JobStatusJson(*store_);
  if (!j.ok()) return nlohmann::json::object();
  view_.SetRunDir(j->value("run_dir", ""));
  if (run) *run = view_.Snapshot(WallSeconds());
  return j.value();
}

bool JobApiServer::Impl::Authorized(const httplib::Request& req, httplib::Response& res) {
  auto j = JobStatusJson(*store_);
  std::string why = "no job is running";
  if (j.ok()) {
    auto token = ReadRunToken(j->value("run_dir", ""));
    if (token.ok() && BearerMatches(req.get_header_value("Authorization"), token.value())) return true;
    why = token.ok() ? fmt::format("expected the header Authorization: Bearer <the token in {}/{}>",
                                   j->value("run_dir", ""), kTokenFileName)
                     : token.status().message();
  }
  res.status = kHttpUnauthorized;
  res.set_header("WWW-Authenticate", "Bearer realm=\"elastrain\"");
  res.set_content(nlohmann::json{{"error", "unauthorized: " + why}}.dump(), "application/json");
  return false;
}

void JobApiServer::Impl::Routes() {
  server_.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(DashboardHtml(), "text/html; charset=utf-8");
  });
  server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    RunSnapshot run;
    const nlohmann::json st = Current(&run);
    res.set_content(RenderPrometheus(st, run), "text/plain; version=0.0.4; charset=utf-8");
  });
  server_.Get("/api/v1/checkpoints", [this](const httplib::Request&, httplib::Response& res) {
    const nlohmann::json st = Current(nullptr);
    if (!st.contains("job")) return Reply(res, Status::NotFound("no job has been submitted"), {});
    Reply(res, Status::OK(), CheckpointsJson(st.value("run_dir", "")));
  });
  server_.Get("/api/v1/goodput", [this](const httplib::Request&, httplib::Response& res) {
    RunSnapshot run;
    const nlohmann::json st = Current(&run);
    if (!st.contains("job")) return Reply(res, Status::NotFound("no job has been submitted"), {});
    Reply(res, Status::OK(), run.goodput.ToJson());
  });
  server_.Get("/api/v1/dashboard", [this](const httplib::Request&, httplib::Response& res) {
    RunSnapshot run;
    const nlohmann::json st = Current(&run);
    Reply(res, Status::OK(), DashboardJson(st, run, st.contains("job") ? CheckpointsJson(st.value("run_dir", "")) : nlohmann::json::array()));
  });
  server_.Get("/api/v1/job", [this](const httplib::Request&, httplib::Response& res) {
    auto j = JobStatusJson(*store_);
    Reply(res, j.status(), j.ok() ? j.value() : nlohmann::json());
  });
  server_.Get("/api/v1/events", [this](const httplib::Request&, httplib::Response& res) {
    auto j = JobEventsJson(*store_);
    Reply(res, j.status(), j.ok() ? j.value() : nlohmann::json());
  });
  server_.Post("/api/v1/stop", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorized(req, res)) return;
    Reply(res, RequestJobStop(*store_), {{"stop", "requested"}});
  });
  server_.Post("/api/v1/chaos", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorized(req, res)) return;
    auto body = nlohmann::json::parse(req.body, nullptr, false);
    if (!body.is_object()) return Reply(res, Status::InvalidArgument("chaos: expected a JSON object body"), {});
    Reply(res,
          RequestChaos(*store_, body.value("action", ""), body.value("rank", -1), body.value("host", ""), !embedded_),
          {{"chaos", "requested"}});
  });
  server_.Post("/api/v1/jobs", [this](const httplib::Request& req, httplib::Response& res) {
    if (embedded_)
      return Reply(res, Status::FailedPrecondition("this is an embedded `elastrain train`; submit to an `elastrain head`"),
                   {});
    auto body = nlohmann::json::parse(req.body, nullptr, false);
    if (!body.is_object() || !body.contains("config_yaml"))
      return Reply(res, Status::InvalidArgument("submit: expected {\"config_yaml\": ...}"), {});
    auto cfg = LoadConfigText(body.value("config_yaml", ""), "submitted config");
    if (!cfg.ok()) return Reply(res, Status::InvalidArgument(cfg.status().message()), {});
    auto spec = SubmitJob(*store_, cfg.value());
    Reply(res, spec.status(), spec.ok() ? nlohmann::json{{"job_id", spec->job_id}, {"run_dir", spec->run_dir},
                                                         {"token_file", spec->run_dir + "/" + kTokenFileName}}
                                        : nlohmann::json());
  });
}

Result<std::string> JobApiServer::Impl::Start(const std::string& host, int port) {
  Routes();
  server_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    res.status = kHttpInternalError;
    res.set_content(nlohmann::json{{"error", what}}.dump(), "application/json");
  });
  const int bound = port == 0 ? server_.bind_to_any_port(host) : (server_.bind_to_port(host, port) ? port : -1);
  if (bound <= 0)
    return Status::Unavailable(fmt::format("cannot listen on {}:{} (in use, or not a local address)", host, port));
  thread_ = std::thread([this] { server_.listen_after_bind(); });
  return fmt::format("http://{}:{}", host, bound);
}

JobApiServer::JobApiServer(std::shared_ptr<Store> store, bool embedded)
    : impl_(std::make_unique<Impl>(std::move(store), embedded)) {}
JobApiServer::~JobApiServer() = default;
Result<std::string> JobApiServer::Start(const std::string& host, int port) { return impl_->Start(host, port); }
void JobApiServer::Stop() { impl_->Stop(); }

}  // namespace elastrain
