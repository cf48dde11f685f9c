// The tuning report (deltac/autotune.h, write_report): per bucket, one bar
// per candidate (its median time), the pick and the default marked, wrong
// answers listed with their error. HTML (an SVG per bucket and a table) or
// one SVG.
#include "deltac/autotune.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace deltac::tune {
namespace {

std::string esc(const std::string &s) {
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

std::string fmt(double x, const char *f = "%.1f") {
  char b[64];
  std::snprintf(b, sizeof b, f, x);
  return b;
}

std::string timeStr(double us) {
  return us >= 1000 ? fmt(us / 1000, "%.3f ms") : fmt(us, "%.1f us");
}

// The SVG of one bucket at vertical offset y0; returns its height.
int bucketSvg(std::ostringstream &o, const BucketResult &b, int y0) {
  std::vector<int> order;
  for (size_t i = 0; i < b.all.size(); ++i)
    order.push_back(int(i));
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    const Measurement &a = b.all[x], &c = b.all[y];
    if ((a.ok && !a.pruned) != (c.ok && !c.pruned))
      return a.ok && !a.pruned;
    if (a.rounds != c.rounds)
      return a.rounds > c.rounds;
    return a.median_us < c.median_us;
  });
  // Linear scale up to 3x the fastest; slower bars are cut there (the label
  // keeps the time).
  double best = 0;
  for (const Measurement &m : b.all)
    if (m.ok && m.median_us > 0 && (best == 0 || m.median_us < best))
      best = m.median_us;
  const double maxUs = std::max(3 * best, 1e-9);
  const int labelW = 300, barW = 420, row = 18;
  int y = y0;
  o << "<text x='4' y='" << y + 14 << "' font-weight='bold'>bucket "
    << (b.tokens) << " tokens x " << b.batch << " sequences"
    << (b.elsewhere ? " (tuned by another worker)"
        : b.skipped ? " (already in the database: skipped)" : "") << "</text>\n";
  y += 22;
  for (int i : order) {
    const Measurement &m = b.all[i];
    const bool win = i == b.winner, def = i == b.default_index;
    std::string label = candidate_string(m.cand) + (def ? " [default]" : "");
    o << "<text x='4' y='" << y + 13 << "'" << (win ? " font-weight='bold'" : "")
      << ">" << esc(label) << "</text>";
    if (!m.ok || m.pruned) {
      o << "<text x='" << labelW << "' y='" << y + 13 << "' fill='"
        << (m.pruned ? "#777" : "#c0392b") << "'>" << esc(m.why) << "</text>\n";
    } else {
      const bool cut = m.median_us > maxUs;
      const int w = std::max(1, int(barW * std::min(m.median_us, maxUs) / maxUs));
      const char *color = win ? "#2a9d2a" : def ? "#3b6fd4" : "#999";
      const double opacity = 0.35 + 0.65 * std::min(1.0, m.rounds / 4.0);
      o << "<rect x='" << labelW << "' y='" << y + 3 << "' width='" << w
        << "' height='" << row - 5 << "' fill='" << color << "' fill-opacity='"
        << fmt(opacity, "%.2f") << "'><title>" << esc(label) << ": "
        << timeStr(m.median_us) << ", " << m.samples << " samples, round "
        << m.rounds << "</title></rect>";
      if (m.exhaustive_us > 0) {
        const int xe = labelW + int(barW * std::min(m.exhaustive_us, maxUs) / maxUs);
        o << "<line x1='" << xe << "' x2='" << xe << "' y1='" << y + 1
          << "' y2='" << y + row - 1 << "' stroke='black'/>";
      }
      o << "<text x='" << labelW + w + 6 << "' y='" << y + 13 << "'>"
        << (cut ? "&gt;&gt; " : "") << timeStr(m.median_us) << " (round " << m.rounds
        << (win ? ", picked" : "");
      if (m.regs >= 0) // the compiler's resource report
        o << "; " << m.regs << " regs" << (m.spill > 0 ? ", " + std::to_string(m.spill) + " B spill" : "");
      o << ")</text>\n";
    }
    y += row;
  }
  return y - y0 + 10;
}

std::string svgOf(const std::vector<BucketResult> &results, int *height) {
  std::ostringstream body;
  int y = 4;
  for (const BucketResult &b : results)
    y += bucketSvg(body, b, y);
  *height = y;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='1000' height='" << y
    << "' font-family='monospace' font-size='12'>\n"
    << body.str() << "</svg>\n";
  return o.str();
}

} // namespace

bool write_report(const std::string &path, const Spec &spec,
                  const std::vector<BucketResult> &results, std::string *error) {
  std::ostringstream o;
  const bool svg = path.size() >= 4 && path.substr(path.size() - 4) == ".svg";
  int h = 0;
  if (svg) {
    o << svgOf(results, &h);
  } else {
    o << "<!doctype html><html><head><meta charset='utf-8'><title>deltac-tune "
         "report</title><style>body{font-family:sans-serif}td,th{padding:2px "
         "8px;text-align:right}td:first-child{text-align:left}</style></head>"
         "<body>\n<h1>deltac-tune report</h1>\n<p>variant "
      << variant_name(spec.variant) << ", heads " << spec.H << ", value heads "
      << spec.HV << ", K " << spec.K << ", V " << spec.V << ", in "
      << dtype_name(spec.in_dtype) << ", out " << dtype_name(spec.out_dtype)
      << ", target " << device_name(spec.device) << "</p>\n<p>env: ";
    for (const auto &kv : current_env(spec.device))
      o << esc(kv.first) << "=" << esc(kv.second) << "; ";
    o << "</p>\n<table border='1' cellspacing='0'><tr><th>bucket</th>"
         "<th>candidates</th><th>wrong / failed</th><th>default</th>"
         "<th>pick</th><th>pick time</th><th>speedup</th><th>tune s</th>"
         "<th>exhaustive best</th><th>gap</th><th>exhaustive s</th></tr>\n";
    for (const BucketResult &b : results) {
      if (b.skipped || b.winner < 0) {
        o << "<tr><td>" << b.tokens << "</td><td colspan='10'>"
          << (b.elsewhere ? "another worker" : "skipped") << "</td></tr>\n";
        continue;
      }
      int bad = 0;
      for (const Measurement &m : b.all)
        bad += !m.ok;
      o << "<tr><td>" << b.tokens << " x " << b.batch << "</td><td>"
        << b.all.size() << "</td><td>" << bad << "</td><td>"
        << timeStr(b.default_us) << "</td><td>"
        << esc(candidate_string(b.all[b.winner].cand))
        << (b.default_kept ? " (default kept)" : "") << "</td><td>"
        << timeStr(b.winner_us) << "</td><td>"
        << fmt(b.default_us / b.winner_us, "%.2fx") << "</td><td>"
        << fmt(b.tune_s) << "</td>";
      if (b.exhaustive_winner >= 0)
        o << "<td>" << esc(candidate_string(b.all[b.exhaustive_winner].cand))
          << "</td><td>" << fmt(100 * b.gap, "%.1f%%") << "</td><td>"
          << fmt(b.exhaustive_s) << "</td>";
      else
        o << "<td>-</td><td>-</td><td>-</td>";
      o << "</tr>\n";
    }
    o << "</table>\n<p>Bars: median time per call of each candidate in the "
         "last halving round it reached (paler: eliminated earlier; scale up to 3x "
         "the fastest, &gt;&gt; marks a cut bar); green: "
         "the pick, blue: the default rule; a black tick: the exhaustive "
         "search's median (--compare-exhaustive). Wrong answers never get "
         "timed.</p>\n"
      << svgOf(results, &h) << "</body></html>\n";
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << o.str();
    if (!out) {
      *error = "--report: cannot write " + path;
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = "--report: cannot write " + path;
    return false;
  }
  return true;
}

} // namespace deltac::tune
