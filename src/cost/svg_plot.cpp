#include "cost/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace elastrain {

namespace {

constexpr double kWidth = 800, kHeight = 480;
constexpr double kLeft = 80, kRight = 260, kTop = 40, kBottom = 60;  // margins
constexpr size_t kMaxPointsPerSeries = 2000;  // more add bytes, not information
const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

std::string Escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

// About five round tick values covering [lo, hi].
std::vector<double> Ticks(double lo, double hi) {
  const double span = std::max(hi - lo, 1e-9);
  const double raw = span / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + 1e-9 * span; v += step) t.push_back(v);
  return t;
}

}  // namespace

std::string CostTimeSvg(const std::vector<PlotSeries>& series, const std::string& title) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const PlotSeries& s : series)
    for (auto [x, y] : s.points) x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  // Pad 5% so no point sits on an axis.
  const double px = std::max((x1 - x0) * 0.05, 1e-6), py = std::max((y1 - y0) * 0.05, 1e-6);
  x0 -= px, x1 += px, y0 -= py, y1 += py;
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto X = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto Y = [&](double y) { return kTop + ph - (y - y0) / (y1 - y0) * ph; };

  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kWidth, kHeight);
  o += fmt::format("<text x=\"{}\" y=\"24\" font-size=\"15\">{}</text>\n", kLeft, Escape(title));
  o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n", kLeft,
                   kTop, pw, ph);
  for (double t : Ticks(x0, x1))
    o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"black\"/>"
                     "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
                     X(t), kTop + ph, kTop + ph + 5, kTop + ph + 20, t);
  for (double t : Ticks(y0, y1))
    o += fmt::format("<line x1=\"{0}\" y1=\"{2:.1f}\" x2=\"{1}\" y2=\"{2:.1f}\" stroke=\"black\"/>"
                     "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
                     kLeft - 5, kLeft, Y(t), kLeft - 8, Y(t) + 4, t);
  o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">completion time (hours)</text>\n", kLeft + pw / 2,
                   kHeight - 15);
  o += fmt::format("<text x=\"18\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0})\">cost (USD)</text>\n",
                   kTop + ph / 2);
  for (size_t i = 0; i < series.size(); ++i) {
    const char* colour = kColours[i % std::size(kColours)];
    const PlotSeries& s = series[i];
    const size_t stride = std::max<size_t>(1, (s.points.size() + kMaxPointsPerSeries - 1) / kMaxPointsPerSeries);
    o += fmt::format("<g fill=\"{}\" fill-opacity=\"0.5\">\n", colour);
    for (size_t k = 0; k < s.points.size(); k += stride)
      o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2\"/>\n", X(s.points[k].first), Y(s.points[k].second));
    o += "</g>\n";
    const double ly = kTop + 10 + 20 * i;
    o += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
                     kLeft + pw + 15, ly, colour, kLeft + pw + 25, ly + 4, Escape(s.label));
  }
  o += "</svg>\n";
  return o;
}

}  // namespace elastrain
