#include "monitor/dashboard.h"

#include "common/clock.h"
#include "common/json.h"
#include "wire/protocol.h"

namespace elastrain {

extern const char kEmbeddedDashboardHtml[];  // generated from web/dashboard.html

namespace {

// Keeps every k-th point, and always the last, so that at most kMaxSeriesPoints remain.
nlohmann::json Thin(const std::vector<nlohmann::json>& v) {
  nlohmann::json out = nlohmann::json::array();
  const size_t k = v.size() / kMaxSeriesPoints + 1;
  for (size_t i = 0; i < v.size(); ++i)
    if (i % k == 0 || i + 1 == v.size()) out.push_back(v[i]);
  return out;
}

}  // namespace

nlohmann::json DashboardJson(const nlohmann::json& status, const RunSnapshot& run, const nlohmann::json& checkpoints) {
  std::vector<nlohmann::json> series, evals, events;
  for (const nlohmann::json& m : run.metrics) {
    if (m.contains("loss"))
      series.push_back({{"step", LenientInteger(m, "step", 0)}, {"loss", LenientNumber(m, "loss")},
                        {"tps", LenientNumber(m, "tokens_per_sec")}, {"mfu", LenientNumber(m, "mfu")},
                        {"time", LenientNumber(m, "wall_time")}, {"generation", LenientInteger(m, "generation", 0)},
                        {"world", LenientInteger(m, "world_size", 0)}});
    else if (m.contains("eval_loss"))
      evals.push_back({{"step", LenientInteger(m, "step", 0)}, {"eval_loss", LenientNumber(m, "eval_loss")}});
  }
  const size_t first = run.events.size() > kMaxEvents ? run.events.size() - kMaxEvents : 0;
  events.assign(run.events.begin() + first, run.events.end());
  return {{"job", status},
          {"now", WallSeconds()},
          {"series", Thin(series)},
          {"evals", Thin(evals)},
          {"events", events},
          {"goodput", run.goodput.ToJson()},
          {"checkpoints", checkpoints}};
}

const std::string& DashboardHtml() {
  static const std::string html(kEmbeddedDashboardHtml);
  return html;
}

std::string ReportHtml(const nlohmann::json& data) {
  nlohmann::json d = data;
  d["static"] = true;
  std::string js = d.dump();
  // "</script>" inside the JSON would end the element early.
  for (size_t p = 0; (p = js.find("</", p)) != std::string::npos; p += 3) js.replace(p, 2, "<\\/");
  std::string html = DashboardHtml();
  const std::string marker = "<!--ELASTRAIN_DATA-->";
  const size_t at = html.find(marker);
  const std::string tag = "<script>window.ELASTRAIN_DATA = " + js + ";</script>";
  if (at == std::string::npos) return html + tag;
  return html.replace(at, marker.size(), tag);
}

}  // namespace elastrain
