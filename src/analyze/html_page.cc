// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The page around the charts: its style, the sortable tables, and the script
// that checks the page as a reader sees it and records what it found on <body>.
#include <fmt/format.h>

#include <string>

#include "joule/analyze/svg_chart.h"

namespace joule {

std::string html_page(const std::string& title, const std::string& body) {
  std::string html = fmt::format(R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark"><title>{0}</title>
<style>
:root {{ --bg: #ffffff; --fg: #1d2127; --muted: #5b6470; --line: #d5d9df; --panel: #f5f7f9; --accent: #0b63b8;
  --c0: #0072b2; --c1: #d55e00; --c2: #009e73; --c3: #cc79a7; --c4: #b8860b; --c5: #56b4e9; --c6: #8c564b; --c7: #6b6b6b; }}
@media (prefers-color-scheme: dark) {{
  :root {{ --bg: #15181d; --fg: #e4e7eb; --muted: #9aa3ad; --line: #39404a; --panel: #1e232a; --accent: #6cb4f5;
    --c0: #56a8e6; --c1: #ff8c4d; --c2: #33c99a; --c3: #e99ad0; --c4: #f0c040; --c5: #8fd3fa; --c6: #cf9f8f; --c7: #b4b4b4; }}
}}
* {{ box-sizing: border-box; }}
body {{ font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; padding: 1em clamp(0.6em, 3vw, 2.5em);
  max-width: 1500px; background: var(--bg); color: var(--fg); }}
h1 {{ font-size: 1.5em; margin: 0.4em 0; overflow-wrap: break-word; }} h2 {{ font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid var(--line); }}
p, li {{ max-width: 80ch; overflow-wrap: break-word; }}
.summary {{ background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 0.6em 1.2em; }}
.summary li {{ margin: 0.3em 0; }}
.simulated {{ border: 3px solid #d55e00; border-radius: 6px; padding: 0.5em 0.8em; color: #d55e00; font-size: 1.1em; }}
.charts {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 460px), 1fr)); gap: 1em; }}
figure.chart {{ margin: 0; min-width: 0; }} figure.chart.wide {{ grid-column: 1 / -1; }}
figure.chart figcaption {{ color: var(--muted); font-size: 0.9em; }}
svg.plot {{ display: block; width: 100%; height: auto; background: var(--bg); color: var(--fg);
  border: 1px solid var(--line); border-radius: 4px; }}
/* Each chart is drawn twice: for a desk and for a phone, whose drawing is
   narrow enough that its text reads at 12 px without scrolling. Tables scroll. */
svg.plot.phone {{ display: none; }}
@media (max-width: 600px) {{ svg.plot.desk {{ display: none; }} svg.plot.phone {{ display: block; }} }}
svg.plot text {{ fill: var(--fg); font-family: system-ui, sans-serif; }}
svg.plot .title {{ font-weight: 600; font-size: 15px; }} svg.plot .tick {{ font-size: 12px; fill: var(--muted); }}
svg.plot .label {{ font-size: 13px; }} svg.plot .legend {{ font-size: 12px; }}
svg.plot .point-label {{ font-size: 12px; fill: var(--muted); }} svg.plot .mark-label {{ font-size: 12px; font-weight: 600; }}
svg.plot .rule-label {{ font-size: 12px; fill: var(--muted); }} svg.plot .leader {{ stroke: var(--muted); stroke-width: 0.9; }}
svg.plot .grid {{ stroke: var(--line); stroke-width: 0.7; }} svg.plot .axis {{ stroke: var(--muted); }}
svg.plot .rule {{ stroke: var(--muted); stroke-dasharray: 5 4; stroke-width: 1.3; }}
svg.plot .mark {{ fill: none; stroke: var(--fg); stroke-width: 1.8; }} svg.plot .errorbar {{ stroke-width: 1.4; fill: none; }}
.c0 {{ color: var(--c0); }} .c1 {{ color: var(--c1); }} .c2 {{ color: var(--c2); }} .c3 {{ color: var(--c3); }}
.c4 {{ color: var(--c4); }} .c5 {{ color: var(--c5); }} .c6 {{ color: var(--c6); }} .c7 {{ color: var(--c7); }}
table {{ display: block; max-width: 100%; overflow-x: auto; border-collapse: collapse; margin: 0.6em 0; font-variant-numeric: tabular-nums;
  /* A shadow at an edge with more columns beyond it (scroll sideways). */
  background: linear-gradient(to right, var(--bg) 30%, transparent) left / 40px 100% no-repeat local,
    linear-gradient(to left, var(--bg) 30%, transparent) right / 40px 100% no-repeat local,
    radial-gradient(farthest-side at 0 50%, rgba(0,0,0,.25), transparent) left / 14px 100% no-repeat scroll,
    radial-gradient(farthest-side at 100% 50%, rgba(0,0,0,.25), transparent) right / 14px 100% no-repeat scroll; }}
td, th {{ border-bottom: 1px solid var(--line); padding: 0.25em 0.45em; text-align: right; white-space: nowrap; }}
th {{ white-space: normal; vertical-align: bottom; min-width: 4em; }}
th {{ background: var(--panel); position: relative; }} td:first-child, th:first-child {{ text-align: left; }}
table.sortable th {{ cursor: pointer; user-select: none; }} table.sortable th[aria-sort]::after {{ content: " \2195"; color: var(--muted); }}
td.notes {{ white-space: normal; min-width: 9em; text-align: left; }} .tag {{ white-space: nowrap; display: inline-block; font-size: 0.8em; border: 1px solid var(--line); border-radius: 3px; padding: 0 0.3em; margin-left: 0.3em; color: var(--muted); }}
.muted {{ color: var(--muted); }} pre {{ background: var(--panel); padding: 1em; overflow-x: auto; }}
</style></head><body>
<h1>{0}</h1>
)",
                                 html_escape(title));
  html += body;
  html += R"(<script>
// Sortable tables: a click on a header sorts by that column (again: reversed).
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, column) {
    th.setAttribute('aria-sort', 'none');
    th.addEventListener('click', function () {
      var rows = Array.prototype.slice.call(table.querySelectorAll('tr')).filter(function (r) { return r.querySelector('td'); });
      var up = th.getAttribute('aria-sort') !== 'ascending';
      var key = function (row) {
        var cell = row.children[column]; var n = cell && cell.getAttribute('data-sort');
        return n !== null && n !== undefined && n !== '' ? parseFloat(n) : (cell ? cell.textContent : '');
      };
      rows.sort(function (a, b) { var x = key(a), y = key(b); var c = x < y ? -1 : x > y ? 1 : 0; return up ? c : -c; });
      table.querySelectorAll('th').forEach(function (h) { h.setAttribute('aria-sort', 'none'); });
      th.setAttribute('aria-sort', up ? 'ascending' : 'descending');
      rows.forEach(function (r) { r.parentNode.appendChild(r); });
    });
  });
});
// Checks the page as a person would see it and records on <body> what it
// found: how many charts show and drew marks (data-plots, data-plots-ok),
// what sticks out (data-overflow), the smallest chart text as drawn in CSS
// pixels (data-min-font-px), labels away from their point without a leader
// or on top of each other (data-label-problems), a series name drawn in two
// colours (data-colour-conflicts) and the names each colour stands for
// (data-colours), and main tables that scroll sideways (data-table-scroll).
// Only what shows counts: a chart's desk or phone drawing.
window.addEventListener('load', function () {
  var ok = 0, overflow = [], labels = [], smallest = Infinity, colours = {}, names = {};
  var shown = Array.prototype.filter.call(document.querySelectorAll('svg.plot'), function (svg) {
    return svg.getBoundingClientRect().width > 0;
  });
  if (document.documentElement.scrollWidth > window.innerWidth) overflow.push('page');
  shown.forEach(function (svg, i) {
    var box = svg.getBBox(), marks = svg.querySelectorAll('polyline, circle, rect').length;
    if (box.width > 0 && box.height > 0 && marks > 0) ok++;
    var r = svg.getBoundingClientRect(), p = svg.parentElement.getBoundingClientRect();
    if (r.left < p.left - 1 || r.right > p.right + 1 || r.right > window.innerWidth) overflow.push('chart' + i);
    var scale = r.width / svg.viewBox.baseVal.width;
    // On screen, so rotated labels count as drawn.
    svg.querySelectorAll('text').forEach(function (t) {
      var b = t.getBoundingClientRect();
      if (b.left < r.left - 1 || b.top < r.top - 1 || b.right > r.right + 1 || b.bottom > r.bottom + 1)
        overflow.push('chart' + i + ' text "' + t.textContent + '"');
      smallest = Math.min(smallest, parseFloat(getComputedStyle(t).fontSize) * scale);
    });
    var placed = [];
    svg.querySelectorAll('text[data-anchor]').forEach(function (t) {
      var b = t.getBBox(), a = t.getAttribute('data-anchor').split(',').map(parseFloat);
      var dx = Math.max(b.x - a[0], 0, a[0] - b.x - b.width), dy = Math.max(b.y - a[1], 0, a[1] - b.y - b.height);
      if (Math.sqrt(dx * dx + dy * dy) > 14 && !t.hasAttribute('data-leader'))
        labels.push('chart' + i + ' "' + t.textContent + '" far from its point');
      placed.forEach(function (o) {
        if (b.x + 1 < o.b.x + o.b.width && o.b.x + 1 < b.x + b.width && b.y + 1 < o.b.y + o.b.height && o.b.y + 1 < b.y + b.height)
          labels.push('chart' + i + ' "' + t.textContent + '" over "' + o.text + '"');
      });
      placed.push({ b: b, text: t.textContent });
    });
    svg.querySelectorAll('text.legend').forEach(function (t) {
      var c = (t.parentElement.getAttribute('class') || '').match(/\bc[0-9]\b/);
      if (!c) return;
      (names[t.textContent] = names[t.textContent] || {})[c[0]] = true;
      (colours[c[0]] = colours[c[0]] || {})[t.textContent] = true;
    });
  });
  var conflicts = Object.keys(names).filter(function (n) { return Object.keys(names[n]).length > 1; });
  var scrolling = Array.prototype.filter.call(document.querySelectorAll('table.main'), function (t) {
    return t.scrollWidth > t.clientWidth + 1;
  }).map(function (t) { return t.id || 'table'; });
  document.body.setAttribute('data-min-font-px', isFinite(smallest) ? smallest.toFixed(1) : 'none');
  document.body.setAttribute('data-plots', shown.length);
  document.body.setAttribute('data-plots-ok', ok);
  document.body.setAttribute('data-overflow', overflow.length ? overflow.join('; ') : 'none');
  document.body.setAttribute('data-label-problems', labels.length ? labels.join('; ') : 'none');
  document.body.setAttribute('data-colour-conflicts', conflicts.length ? conflicts.join('; ') : 'none');
  document.body.setAttribute('data-colours', Object.keys(colours).sort().map(function (c) {
    return c + '=' + Object.keys(colours[c]).join('|');
  }).join('; '));
  document.body.setAttribute('data-table-scroll', scrolling.length ? scrolling.join('; ') : 'none');
  document.body.setAttribute('data-width', window.innerWidth);
});
</script>
</body></html>
)";
  return html;
}

}  // namespace joule
