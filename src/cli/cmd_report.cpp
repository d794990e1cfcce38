// `elastrain report RUN_DIR [--html PATH] [--json]`: the goodput breakdown of a run,
// finished or still running, from its events.jsonl and metrics.jsonl; and an HTML
// report (default <run>/report.html) with the dashboard's charts and the data inlined.
// Exit codes: 0 printed, 2 bad arguments or not a run directory.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "common/clock.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/files.h"
#include "common/safe_path.h"
#include "config/config.h"
#include "wire/events.h"
#include "wire/exit_codes.h"
#include "monitor/dashboard.h"
#include "wire/protocol.h"
#include "monitor/goodput.h"
#include "monitor/job_api.h"
#include "common/json.h"
#include "monitor/run_view.h"

namespace elastrain {

namespace {

// The fields of JobStatusJson that a run directory can tell without the controller.
nlohmann::json StatusFromFiles(const std::string& run_dir, const RunSnapshot& run) {
  nlohmann::json j = {{"run_dir", run_dir}, {"state", run.goodput.state}, {"generation", -1}, {"world", 0},
                      {"step", 0}, {"failures", 0}, {"restarts", 0}, {"latest_checkpoint_step", -1}};
  auto cfg_text = ReadFile(run_dir + "/config.yml");
  if (cfg_text.ok()) {
    auto cfg = LoadConfigText(cfg_text.value(), run_dir + "/config.yml");
    if (cfg.ok()) j.update(ConfigStatusFields(cfg.value()));
  }
  int64_t restarts = 0;
  for (const nlohmann::json& line : run.events) {
    // Typed reads (wire/events.h): a damaged or unknown line is skipped, never throws.
    const auto r = DecodeEvent(line);
    if (!r.ok()) continue;
    if (const auto* e = EventAs<JobSubmittedEvent>(r.value())) j["job"] = e->job;
    if (const auto* e = EventAs<GenerationStartedEvent>(r.value())) {
      j["generation"] = e->generation;
      j["world"] = e->world;
      if (e->generation > 0) j["restarts"] = ++restarts;
    }
    if (const auto* e = EventAs<GenerationFailedEvent>(r.value())) j["failures"] = e->failures;
    if (const auto* e = EventAs<CheckpointSavedEvent>(r.value())) j["latest_checkpoint_step"] = e->step;
    if (const auto* e = EventAs<JobStateEvent>(r.value())) j["reason"] = e->reason;
  }
  for (const nlohmann::json& m : run.metrics)
    if (m.contains("loss")) j["step"] = LenientInteger(m, "step", 0);
  if (!j.contains("job")) j["job"] = std::filesystem::path(run_dir).filename().string();
  return j;
}

}  // namespace

int RunReportCommand(const std::vector<std::string>& args) {
  CLI::App app{"elastrain report: a run's goodput breakdown and an HTML report with the dashboard's charts"};
  std::string run_dir, html;
  bool json = false;
  app.add_option("run_dir", run_dir, "the run directory (<base_output_directory>/<run_name>)")->required();
  app.add_option("--html", html, "where to write the HTML report (default RUN_DIR/report.html)");
  app.add_flag("--json", json, "print the breakdown as JSON instead of a table");
  if (int rc = ParseArgs(app, "report", args); rc >= 0) return rc;
  GuardDirectory(run_dir);  // its files are read, and report.html written, never through a link
  const std::string events = run_dir + "/events.jsonl";
  if (!std::filesystem::is_regular_file(events))
    return FailCommand("report", Status::NotFound(fmt::format(
                                     "{}: not a run directory (expected {}, written by elastrain train)", run_dir, events)));
  const RunSnapshot run = ReadRun(run_dir, WallSeconds());
  if (run.goodput.wall() <= 0 && run.events.empty())
    return FailCommand("report", Status::InvalidArgument(events + ": no events with a time; nothing to report"));
  if (html.empty()) html = run_dir + "/report.html";
  const nlohmann::json data = DashboardJson(StatusFromFiles(run_dir, run), run, CheckpointsJson(run_dir));
  Status st = WriteFileAtomic(html, ReportHtml(data));
  if (!st.ok()) return FailCommand("report", st);
  if (json) {
    std::printf("%s\n", run.goodput.ToJson().dump(2).c_str());
  } else {
    std::printf("run %s\n%s", run_dir.c_str(), FormatGoodput(run.goodput).c_str());
    std::printf("HTML report: %s\n", html.c_str());
  }
  return kExitSuccess;
}

}  // namespace elastrain
