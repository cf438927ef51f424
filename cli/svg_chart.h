// One chart as inline SVG text: data coordinates (from 0 to each axis's
// maximum) mapped onto a fixed box, with axes, round-number ticks and a
// <title> tooltip on every mark, which every browser shows on hover with no
// script. The HTML report (cli/html_report.h) is made of these.
#ifndef UMLAB_CLI_SVG_CHART_H_
#define UMLAB_CLI_SVG_CHART_H_

#include <string>
#include <string_view>
#include <vector>

namespace umlab::cli {

// Text made safe inside SVG or HTML elements and attribute values.
std::string MarkupEscape(std::string_view text);

// A fixed palette, picked by index (a policy's position in the report).
const char* PaletteColor(size_t index);

class SvgChart {
 public:
  struct Axis {
    double max = 1;  // the axis runs from 0 to max; a max <= 0 becomes 1
    std::string label;
    bool ticks = true;  // false for categories (policies), where numbers mean nothing
  };

  SvgChart(int width, int height, Axis x, Axis y);

  // The region between two curves sampled at x = 0, step, 2 step, ...
  void Band(const std::vector<double>& lower, const std::vector<double>& upper, double x_step,
            const char* color, std::string_view tooltip);
  // A curve sampled the same way.
  void Curve(const std::vector<double>& values, double x_step, const char* color,
             std::string_view tooltip);
  // [x0, x1] x [y0, y1], at least one pixel wide.
  void Box(double x0, double x1, double y0, double y1, const char* color,
           std::string_view tooltip);
  // A dashed line across the chart at `y`, labelled at its right end.
  void Rule(double y, const char* color, std::string_view label);

  // The whole <svg> element; `plot` names it (data-plot="...") so a test
  // or a script can find each picture.
  std::string Render(std::string_view plot) const;

 private:
  double PixelX(double x) const;
  double PixelY(double y) const;
  std::string Points(const std::vector<double>& values, double x_step) const;

  int width_, height_;
  Axis x_, y_;
  std::string marks_;
};

// 1.5 GB, 312 MB, 20 kB: bytes in decimal units, for axes and tooltips.
std::string ShortBytes(double bytes);
// 1.25 s, 312 ms, 20 us.
std::string ShortTime(double ns);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_SVG_CHART_H_
