// JSON files read back from a run directory are not trusted: lines whose fields have the
// wrong type are skipped (metrics.jsonl, events.jsonl) or refused with the file and field
// (summary.json), and nothing downstream (goodput, the dashboard data) throws.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "monitor/dashboard.h"
#include "common/json.h"
#include "monitor/run_view.h"
#include "test_dirs.h"
#include "train/run_summary.h"

namespace elastrain {
namespace {

TEST(HostileJsonl, LinesWithWrongTypesAreSkippedAndCounted) {
  ScopedTempDir dir("jsonl_types");
  const std::string path = dir.path() + "/metrics.jsonl";
  std::ofstream(path) << R"({"step":1,"loss":2.5,"wall_time":10,"generation":0})" "\n"
                      << R"({"step":"two","loss":2.4,"wall_time":11})" "\n"            // line 2: string step
                      << R"({"step":3,"loss":{"a":1},"wall_time":12})" "\n"           // line 3: object loss
                      << "[1, 2]\n"                                                    // line 4: not an object
                      << "not json\n"                                                  // line 5
                      << "\n"                                                          // blank: ignored
                      << R"({"step":7,"loss":null,"wall_time":13,"generation":0})" "\n";  // NaN loss: kept
  JsonlTail tail(path, MetricsSchema());
  tail.Refresh();
  ASSERT_EQ(tail.records().size(), 2u);
  EXPECT_EQ(tail.records()[0]["step"], 1);
  EXPECT_EQ(tail.records()[1]["step"], 7);
  EXPECT_EQ(tail.skipped(), 4);
  EXPECT_EQ(JsonlProblem(nlohmann::json::parse(R"({"step":"two"})"), MetricsSchema()),
            R"(field 'step' is string ("two"), expected a number)");
  EXPECT_EQ(JsonlProblem(nlohmann::json::parse(R"({"event":5})"), EventsSchema()),
            "field 'event' is number (5), expected a string");
}

TEST(HostileJsonl, ReportDataFromDamagedFilesDoesNotThrow) {
  ScopedTempDir dir("jsonl_run");
  std::ofstream(dir.path() + "/events.jsonl")
      << R"({"event":"job_submitted","time":100,"job":"j"})" "\n"
      << R"({"event":"generation_started","time":"soon","generation":0,"world":1})" "\n"
      << R"({"event":7,"time":101})" "\n"
      << R"({"event":"generation_started","time":102,"generation":0,"world":"one"})" "\n"
      << R"({"event":"generation_started","time":102,"generation":0,"world":1,"restore":5,"reason":[]})" "\n";
  std::ofstream(dir.path() + "/metrics.jsonl")
      << R"({"step":1,"loss":"nan?","wall_time":103})" "\n"
      << R"({"step":2,"loss":2.0,"wall_time":104,"tokens_per_sec":"fast","generation":0,"world_size":[1]})" "\n"
      << R"({"step":3,"loss":1.5,"wall_time":1e300,"generation":1e300,"world_size":1})" "\n";
  RunSnapshot run;
  ASSERT_NO_THROW(run = ReadRun(dir.path(), 200.0));
  EXPECT_EQ(run.events.size(), 2u);  // lines 2-4 skipped; unchecked fields of other types stay
  EXPECT_EQ(run.metrics.size(), 1u);  // only line 3 fits
  nlohmann::json data;
  ASSERT_NO_THROW(data = DashboardJson(nlohmann::json::object(), run, nlohmann::json::array()));
  ASSERT_NO_THROW(ReportHtml(data));
  EXPECT_EQ(data["series"].size(), 1u);
  EXPECT_EQ(data["series"][0]["generation"], 0);  // 1e300 does not fit int64: the default
}

TEST(HostileSummary, WrongTypesNameTheFieldAndNullIsNan) {
  ScopedTempDir dir("summary_types");
  TrainSummary s;
  s.run_dir = dir.path();
  s.steps = 10;
  s.first_loss = std::nan("");
  ASSERT_TRUE(WriteRunSummary(s).ok());
  auto back = ReadRunSummary(dir.path());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(std::isnan(back->first_loss));
  EXPECT_EQ(back->steps, 10);

  const std::string path = dir.path() + "/summary.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  for (auto [key, bad] : {std::pair<const char*, nlohmann::json>{"steps", "ten"}, {"mfu", "high"},
                          {"steps", 2.5}, {"mesh", 3}, {"world_size", nlohmann::json::array()}}) {
    nlohmann::json damaged = j;
    damaged[key] = bad;
    std::ofstream(path, std::ios::trunc) << damaged.dump();
    auto r = ReadRunSummary(dir.path());
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(std::string("'") + key + "'"), std::string::npos) << r.status().message();
  }
  std::ofstream(path, std::ios::trunc) << "[1,2";
  EXPECT_EQ(ReadRunSummary(dir.path()).status().code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace elastrain
