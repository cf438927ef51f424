#include "cli/svg_chart.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace umlab::cli {
namespace {

// Margins for the axes' labels, in pixels.
constexpr int kLeft = 64, kRight = 12, kTop = 10, kBottom = 36;

// A round step that cuts [0, max] into about four parts: 1, 2 or 5 x 10^k.
double TickStep(double max) {
  const double rough = max / 4;
  const double power = std::pow(10.0, std::floor(std::log10(rough)));
  for (double factor : {1.0, 2.0, 5.0}) {
    if (factor * power >= rough) return factor * power;
  }
  return 10 * power;
}

std::string TickText(double value) {
  if (value == std::floor(value) && std::fabs(value) < 1e6) return absl::StrFormat("%.0f", value);
  return absl::StrFormat("%.3g", value);
}

}  // namespace

std::string MarkupEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* PaletteColor(size_t index) {
  // Tableau 10: distinct in print and for the common colour blindnesses.
  static constexpr const char* kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                            "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                                            "#9c755f", "#bab0ac"};
  return kColors[index % (sizeof(kColors) / sizeof(kColors[0]))];
}

SvgChart::SvgChart(int width, int height, Axis x, Axis y)
    : width_(width), height_(height), x_(std::move(x)), y_(std::move(y)) {
  if (!(x_.max > 0)) x_.max = 1;
  if (!(y_.max > 0)) y_.max = 1;
}

double SvgChart::PixelX(double x) const {
  return kLeft + (width_ - kLeft - kRight) * std::clamp(x / x_.max, 0.0, 1.0);
}

double SvgChart::PixelY(double y) const {
  return height_ - kBottom - (height_ - kTop - kBottom) * std::clamp(y / y_.max, 0.0, 1.0);
}

std::string SvgChart::Points(const std::vector<double>& values, double x_step) const {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    absl::StrAppendFormat(&out, "%.1f,%.1f ", PixelX(i * x_step), PixelY(values[i]));
  }
  return out;
}

void SvgChart::Band(const std::vector<double>& lower, const std::vector<double>& upper,
                    double x_step, const char* color, std::string_view tooltip) {
  const size_t n = std::min(lower.size(), upper.size());
  if (n == 0) return;
  std::string points = Points(std::vector<double>(upper.begin(), upper.begin() + n), x_step);
  for (size_t i = n; i-- > 0;) {
    absl::StrAppendFormat(&points, "%.1f,%.1f ", PixelX(i * x_step), PixelY(lower[i]));
  }
  absl::StrAppendFormat(&marks_, "<polygon points=\"%s\" fill=\"%s\"><title>%s</title></polygon>\n",
                        points, color, MarkupEscape(tooltip));
}

void SvgChart::Curve(const std::vector<double>& values, double x_step, const char* color,
                     std::string_view tooltip) {
  if (values.empty()) return;
  absl::StrAppendFormat(&marks_,
                        "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" "
                        "stroke-width=\"1.5\"><title>%s</title></polyline>\n",
                        Points(values, x_step), color, MarkupEscape(tooltip));
}

void SvgChart::Box(double x0, double x1, double y0, double y1, const char* color,
                   std::string_view tooltip) {
  const double left = PixelX(x0);
  const double width = std::max(1.0, PixelX(x1) - left);
  const double top = PixelY(y1);
  const double height = std::max(0.0, PixelY(y0) - top);
  absl::StrAppendFormat(&marks_,
                        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                        "fill=\"%s\"><title>%s</title></rect>\n",
                        left, top, width, height, color, MarkupEscape(tooltip));
}

void SvgChart::Rule(double y, const char* color, std::string_view label) {
  const double py = PixelY(y);
  absl::StrAppendFormat(&marks_,
                        "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                        "stroke-dasharray=\"4 3\"/><text x=\"%d\" y=\"%.1f\" "
                        "text-anchor=\"end\" font-size=\"10\" fill=\"%s\">%s</text>\n",
                        kLeft, width_ - kRight, py, py, color, width_ - kRight, py - 3, color,
                        MarkupEscape(label));
}

std::string SvgChart::Render(std::string_view plot) const {
  std::string out = absl::StrFormat(
      "<svg data-plot=\"%s\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n",
      MarkupEscape(plot), width_, height_, width_, height_);
  // Grid and ticks first, so the marks draw over them.
  for (const auto& [axis, vertical] : {std::pair{&x_, true}, std::pair{&y_, false}}) {
    if (!axis->ticks) continue;
    const double step = TickStep(axis->max);
    for (double v = 0; v <= axis->max * 1.0001; v += step) {
      if (vertical) {
        absl::StrAppendFormat(&out,
                              "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#ddd\"/>"
                              "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" "
                              "font-size=\"10\">%s</text>\n",
                              PixelX(v), PixelX(v), kTop, height_ - kBottom, PixelX(v),
                              height_ - kBottom + 12, TickText(v));
      } else {
        absl::StrAppendFormat(&out,
                              "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                              "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
                              "font-size=\"10\">%s</text>\n",
                              kLeft, width_ - kRight, PixelY(v), PixelY(v), kLeft - 4,
                              PixelY(v) + 3, TickText(v));
      }
    }
  }
  out += marks_;
  absl::StrAppendFormat(&out,
                        "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#333\"/>"
                        "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n",
                        kLeft, width_ - kRight, height_ - kBottom, height_ - kBottom, kLeft, kLeft,
                        kTop, height_ - kBottom);
  absl::StrAppendFormat(&out,
                        "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"11\">%s</text>\n"
                        "<text transform=\"translate(12,%d) rotate(-90)\" text-anchor=\"middle\" "
                        "font-size=\"11\">%s</text>\n</svg>\n",
                        (kLeft + width_ - kRight) / 2, height_ - 6, MarkupEscape(x_.label),
                        (kTop + height_ - kBottom) / 2, MarkupEscape(y_.label));
  return out;
}

std::string ShortBytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "kB", "MB", "GB", "TB"};
  size_t unit = 0;
  while (std::fabs(bytes) >= 1000 && unit + 1 < std::size(kUnits)) {
    bytes /= 1000;
    ++unit;
  }
  // Two calls: clang checks a format string only when it is a constant.
  if (unit == 0) return absl::StrFormat("%.0f %s", bytes, kUnits[unit]);
  return absl::StrFormat("%.3g %s", bytes, kUnits[unit]);
}

std::string ShortTime(double ns) {
  if (std::fabs(ns) >= 1e9) return absl::StrFormat("%.3g s", ns / 1e9);
  if (std::fabs(ns) >= 1e6) return absl::StrFormat("%.3g ms", ns / 1e6);
  if (std::fabs(ns) >= 1e3) return absl::StrFormat("%.3g us", ns / 1e3);
  return absl::StrFormat("%.0f ns", ns);
}

}  // namespace umlab::cli
