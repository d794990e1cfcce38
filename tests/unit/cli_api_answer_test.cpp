// What the CLI makes of the control API's answers (cli/api_client.h): hostile or foreign
// answers (HTML, not JSON, wrong types, missing fields) become a Corruption naming the head,
// what it answered and what was expected, never an exception; the job commands exit
// kExitBadAnswer for them. The JobStatus record (wire/job_status.h) round-trips.
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <string>
#include <thread>
#include <vector>

#include "cli/api_client.h"
#include "cli/commands.h"
#include "wire/exit_codes.h"
#include "wire/job_status.h"

namespace elastrain {
namespace {

const ApiTarget kTarget{"http://head.example:8265", "secret", "/home/u/.elastrain/head_token"};
const std::string kAnswered = "the head at http://head.example:8265 answered GET /api/v1/job";

JobStatus SampleStatus() {
  JobStatus s;
  s.job = "job-1";
  s.run_dir = "/runs/job-1";
  s.steps = 100;
  s.num_workers = "2:4";
  s.state = JobState::kRunning;
  s.reason = "training";
  s.generation = 2;
  s.world = 2;
  s.step = 40;
  s.agents = {{"a1", "h1", 2, false, ""}};
  s.ranks.resize(2);
  s.ranks[0].rank = 0;
  s.ranks[0].pid = 11;
  s.ranks[0].step = 40;
  s.ranks[0].phase = "train";
  s.ranks[1].rank = 1;
  s.ranks[1].pid = 12;
  s.ranks[1].step = -1;
  s.ranks[1].phase = "unknown";
  for (JobStatusRank& r : s.ranks) {
    r.host = "h1";
    r.agent = "a1";
    r.worker = std::string("w").append(std::to_string(r.rank));
  }
  s.idle_workers = 1;
  return s;
}

// Decodes `body` as an answer of GET /api/v1/job with HTTP `code`, then as a JobStatus.
Result<JobStatus> Decode(int code, const std::string& body) {
  ELASTRAIN_ASSIGN_OR_RETURN(nlohmann::json j, DecodeApiAnswer(kTarget, "GET", "/api/v1/job", code, body));
  return DecodeJobStatus(kTarget, j);
}

TEST(CliApiAnswer, AStatusRoundTrips) {
  const JobStatus s = SampleStatus();
  auto back = Decode(200, ToJsonValue(s).dump());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->job, "job-1");
  EXPECT_EQ(back->state, JobState::kRunning);
  EXPECT_EQ(back->num_workers, "2:4");
  ASSERT_EQ(back->ranks.size(), 2u);
  EXPECT_EQ(back->ranks[1].worker, "w1");
  EXPECT_EQ(back->ranks[1].step, -1);
  EXPECT_EQ(ToJsonValue(*back), ToJsonValue(s));
  // The keys the dashboard, /metrics and tests read keep their names and JSON types.
  const nlohmann::json j = ToJsonValue(s);
  EXPECT_EQ(j["state"], "RUNNING");
  EXPECT_EQ(j["num_workers"], "2:4");
  EXPECT_TRUE(j["ranks"][0]["pid"].is_number_integer());
  EXPECT_TRUE(j["agents"][0]["preempting"].is_boolean());
  for (const char* key : {"job", "run_dir", "steps", "num_workers", "max_failures", "checkpoint_period",
                          "cost_per_worker_hour", "model_name", "launched", "state", "reason", "generation", "world", "step",
                          "failures", "restarts", "latest_checkpoint_step", "started_at", "ended_at", "agents", "ranks",
                          "idle_workers", "time", "hosts", "gray_events", "leader", "leader_url"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_TRUE(j["launched"].is_boolean());
  EXPECT_EQ(j.size(), 27u);
  // A head of a newer version may add keys.
  nlohmann::json newer = j;
  newer["new_field"] = {1, 2};
  EXPECT_TRUE(Decode(200, newer.dump()).ok());
  // An older one lacks `launched` (issue 34): a trainer's job.
  nlohmann::json older = j;
  older.erase("launched");
  auto old_answer = Decode(200, older.dump());
  ASSERT_TRUE(old_answer.ok()) << old_answer.status().message();
  EXPECT_FALSE(old_answer->launched);
}

TEST(CliApiAnswer, HostileAnswersAreAClearCorruption) {
  const nlohmann::json good = ToJsonValue(SampleStatus());
  const auto with = [&](const char* key, nlohmann::json v) {
    nlohmann::json j = good;
    j[key] = std::move(v);
    return j.dump();
  };
  const auto without = [&](const char* key) {
    nlohmann::json j = good;
    j.erase(key);
    return j.dump();
  };
  struct Case {
    std::string body, mentions;
  };
  for (const Case& c : std::vector<Case>{
           {"", "empty"},
           {"<!DOCTYPE html><html><body>Welcome to nginx!</body></html>", "not JSON"},
           {"<!DOCTYPE html><html><body>Welcome to nginx!</body></html>", "starting '<!DOCTYPE html>"},
           {"{\"job\": \"j\"", "not JSON"},
           {std::string("{\"job\": \"\xff\"}"), "not JSON"},
           {std::string(10000, '[') + std::string(10000, ']'), "nested deeper"},
           {"null", "expected a JSON object, got null"},
           {"[]", "expected a JSON object, got an array"},
           {"42", "expected a JSON object, got an integer"},
           {"\"RUNNING\"", "expected a JSON object, got a string"},
           {"{}", "field 'job': missing"},
           {without("state"), "field 'state': missing"},
           {without("world"), "field 'world': missing"},
           {with("job", 5), "field 'job': expected a string, got an integer (5)"},
           {with("state", "RUNNINGX"), "field 'state': "},
           {with("state", 3), "field 'state': "},
           {with("world", 1e20), "field 'world': expected an integer, got a number"},
           {with("world", 4294967296), "field 'world': 4294967296 is out of range"},
           {with("generation", "2"), "field 'generation': expected an integer, got a string"},
           {with("idle_workers", nullptr), "field 'idle_workers': expected an integer, got null"},
           {with("ranks", "none"), "field 'ranks': expected an array, got a string"},
           {with("ranks", {5}), "field 'ranks[0]': expected an object, got an integer"},
           {with("ranks", {{{"rank", 0}}, {{"pid", "12"}}}), "field 'ranks[1].pid': expected an integer"},
           {with("agents", {{{"preempting", "no"}}}), "field 'agents[0].preempting': expected true or false"},
           {with("num_workers", 2), "field 'num_workers': expected a string"},
       }) {
    Result<JobStatus> r = Status::Internal("not run");
    ASSERT_NO_THROW(r = Decode(200, c.body)) << c.body.substr(0, 100);
    ASSERT_FALSE(r.ok()) << c.body.substr(0, 100);
    const std::string m = r.status().message();
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << m;
    EXPECT_EQ(m.rfind(kAnswered, 0), 0u) << m;  // names the head and the request
    EXPECT_NE(m.find(c.mentions), std::string::npos) << c.body.substr(0, 100) << ": " << m;
    EXPECT_NE(m.find("expected"), std::string::npos) << m;
    EXPECT_LT(m.size(), 600u) << m;  // a huge answer is not pasted into the message
  }
}

TEST(CliApiAnswer, ErrorAnswersKeepTheServersStatusOrSayTheyAreForeign) {
  auto nf = DecodeApiAnswer(kTarget, "GET", "/api/v1/job", 404, R"({"error": "no job has been submitted"})");
  EXPECT_EQ(nf.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(nf.status().message(), "no job has been submitted");
  auto bad = DecodeApiAnswer(kTarget, "POST", "/api/v1/chaos", 400, R"({"error": "chaos: field 'rank': ..."})");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  auto unauth = DecodeApiAnswer(kTarget, "GET", "/api/v1/job", 401, R"({"error": 5})");  // error not a string
  EXPECT_EQ(unauth.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unauth.status().message().find("HTTP 401 and no elastrain error"), std::string::npos)
      << unauth.status().message();
  EXPECT_NE(unauth.status().message().find("the token sent is from /home/u/.elastrain/head_token"), std::string::npos);
  auto proxy = DecodeApiAnswer(kTarget, "GET", "/api/v1/job", 502, "<html>\x01 Bad Gateway</html>");
  EXPECT_EQ(proxy.status().code(), StatusCode::kInternal);
  EXPECT_EQ(proxy.status().message(), kAnswered + " with HTTP 502 and no elastrain error, starting '<html>? Bad "
                                                  "Gateway</html>'");
  auto internal = DecodeApiAnswer(kTarget, "GET", "/api/v1/job", 500, R"({"error": "boom"})");
  EXPECT_EQ(internal.status().message(), "GET http://head.example:8265/api/v1/job: HTTP 500: boom");
}

TEST(CliApiAnswer, ArbitraryBytesNeverThrow) {
  std::string s;
  for (int i = 0; i < 3000; ++i) {
    s.push_back(static_cast<char>((i * 7919) % 256));
    for (int code : {200, 401, 404, 500}) EXPECT_NO_THROW((void)Decode(code, s));
  }
  for (const char* body : {R"({"job":"j","run_dir":"r","state":"RUNNING","generation":1,"world":1,"step":1,
                               "ranks":[{"rank":1e400}]})",
                           R"({"job_id": 7, "run_dir": "r"})", R"({"run_dir": "r"})", "[]"}) {
    auto j = DecodeApiAnswer(kTarget, "POST", "/api/v1/jobs", 200, body);
    if (!j.ok()) continue;
    Result<SubmittedJob> sub = Status::Internal("not run");
    ASSERT_NO_THROW(sub = DecodeSubmittedJob(kTarget, *j)) << body;
    EXPECT_FALSE(sub.ok()) << body;
    EXPECT_EQ(sub.status().code(), StatusCode::kCorruption);
  }
  auto sub = DecodeSubmittedJob(kTarget, nlohmann::json{{"job_id", "j"}, {"run_dir", "/r"}});
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  EXPECT_EQ(sub->run_dir, "/r");
}

// A server on loopback that answers every request with `body` (HTTP 200).
class ForeignServer {
 public:
  explicit ForeignServer(std::string body, std::string type) {
    server_.Get(".*", [body, type](const httplib::Request&, httplib::Response& res) { res.set_content(body, type); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~ForeignServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

// `elastrain status` against a server that is not a head: one line naming the head and
// what was expected, and the documented exit code, not an abort.
TEST(CliApiAnswer, StatusCommandExitsBadAnswerOnAForeignServer) {
  ::setenv("ELASTRAIN_TOKEN", "test-token", 1);
  for (const auto& [body, type] : std::vector<std::pair<std::string, std::string>>{
           {"<!DOCTYPE html><html><body>It works!</body></html>", "text/html"},
           {R"({"job": 5, "state": []})", "application/json"},
           {R"({"status": "ok"})", "application/json"}}) {
    ForeignServer server(body, type);
    testing::internal::CaptureStderr();
    testing::internal::CaptureStdout();
    int rc = -1;
    EXPECT_NO_THROW(rc = RunStatusCommand({"--head", server.url()}));
    const std::string err = testing::internal::GetCapturedStderr();
    (void)testing::internal::GetCapturedStdout();
    EXPECT_EQ(rc, kExitBadAnswer) << err;
    EXPECT_NE(err.find("elastrain status: error: the head at " + server.url() + " answered GET /api/v1/job"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("expected"), std::string::npos) << err;
    testing::internal::CaptureStderr();
    testing::internal::CaptureStdout();
    EXPECT_NO_THROW(rc = RunStatusCommand({"--head", server.url(), "--json"}));
    (void)testing::internal::GetCapturedStderr();
    EXPECT_EQ(testing::internal::GetCapturedStdout(), "");  // nothing printed from a bad answer
    EXPECT_EQ(rc, kExitBadAnswer);
  }
  ::unsetenv("ELASTRAIN_TOKEN");
}

// --head URL1,URL2 (issue 36): blanks and empty entries are dropped, one URL stays one.
TEST(CliApiAnswer, AHeadListSplitsOnCommas) {
  EXPECT_EQ(HeadUrls("http://a:1"), std::vector<std::string>{"http://a:1"});
  EXPECT_EQ(HeadUrls(" http://a:1 ,,http://b:2, "), (std::vector<std::string>{"http://a:1", "http://b:2"}));
  EXPECT_TRUE(HeadUrls("").empty());
  EXPECT_TRUE(HeadUrls(" , ,").empty());
}

// Several heads, none answering: one error naming the list, after each was tried.
TEST(CliApiAnswer, AHeadListOfUnreachableHeadsNamesThemAll) {
  ApiTarget t;
  t.url = "http://127.0.0.1:1,http://127.0.0.1:2";
  t.token = "x";
  auto r = CallApi(t, "", "GET", "/api/v1/job");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("no head of http://127.0.0.1:1,http://127.0.0.1:2 answered"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("127.0.0.1:2"), std::string::npos);
  // A list entry that is no URL is refused, not tried.
  t.url = "http://127.0.0.1:1,ftp://x";
  EXPECT_EQ(CallApi(t, "", "GET", "/api/v1/job").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace elastrain
