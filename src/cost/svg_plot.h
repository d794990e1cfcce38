// A scatter plot of simulated trials, cost (USD) against completion time (hours), as
// self-contained SVG text: one colour per series, axes with ticks, a legend.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace elastrain {

struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (hours, USD)
};

std::string CostTimeSvg(const std::vector<PlotSeries>& series, const std::string& title);

}  // namespace elastrain
