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
  for (const nlohmann::json& e : run.events) {
    // Typed reads: a field of another type (a damaged line) gives the default, never throws.
    const std::string name = LenientString(e, "event");
    if (name == "job_submitted") j["job"] = LenientString(e, "job");
    if (name == "generation_started") {
      j["generation"] = LenientInteger(e, "generation", -1);
      j["world"] = LenientInteger(e, "world", 0);
      if (LenientInteger(e, "generation", 0) > 0) j["restarts"] = j["restarts"].get<int64_t>() + 1;
    }
    if (name == "generation_failed") j["failures"] = LenientInteger(e, "failures", 0);
    if (name == "checkpoint_saved") j["latest_checkpoint_step"] = LenientInteger(e, "step", -1);
    if (name == "job_state") j["reason"] = LenientString(e, "reason");
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
