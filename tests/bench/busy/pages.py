"""The pages the busy-host benchmark's browser renders: generated here (nothing fetched), heavy on
layout, paint and JavaScript, as a dashboard or a profile viewer is."""
import os


def flame_svg():
    """An icicle graph of 20,000 frames drawn by script: SVG layout and paint."""
    return """<!doctype html><html><body><svg id="g" width="1280" height="1900"></svg><script>
const g = document.getElementById("g"), ns = "http://www.w3.org/2000/svg";
let seed = 7; const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
function node(x, w, depth) {
  if (depth > 90 || w < 2) return;
  const r = document.createElementNS(ns, "rect");
  r.setAttribute("x", x); r.setAttribute("y", depth * 20); r.setAttribute("width", w - 1);
  r.setAttribute("height", 19); r.setAttribute("fill", "hsl(" + (rnd() * 60 | 0) + ",80%,60%)");
  const t = document.createElementNS(ns, "text");
  t.setAttribute("x", x + 2); t.setAttribute("y", depth * 20 + 14); t.textContent = "fn_" + depth;
  g.appendChild(r); g.appendChild(t);
  let left = w;
  while (left > 2) { const c = Math.max(2, left * rnd()); node(x + w - left, c, depth + 1); left -= c; }
}
node(0, 1280, 0);
</script></body></html>
"""


def big_table():
    """A styled table of 4,000 rows: style and text layout."""
    rows = "".join("<tr><td>%d</td><td class=n>%s</td><td>%.3f</td><td>%s</td><td>%d ms</td></tr>"
                   % (i, "service-%d" % (i % 97), i * 0.731 % 100, "x" * (i % 40), i * 13 % 997)
                   for i in range(4000))
    return ("<!doctype html><html><head><style>table{border-collapse:collapse;font:13px serif}"
            "td{border:1px solid #ccc;padding:2px 6px}tr:nth-child(odd){background:#eef}"
            ".n{font-weight:bold;text-transform:uppercase}</style></head><body><table>"
            + rows + "</table></body></html>")


def script_heavy():
    """JavaScript at work: sorting, JSON, regular expressions, canvas drawing, a flex layout."""
    return """<!doctype html><html><body><canvas id="c" width="1200" height="800"></canvas>
<div id="d" style="display:flex;flex-wrap:wrap"></div><script>
const a = []; for (let i = 0; i < 300000; i++) a.push((i * 2654435761) % 1000003);
a.sort((x, y) => x - y);
const j = JSON.parse(JSON.stringify(a.map(v => ({v, s: "k" + v}))));
let text = j.map(o => o.s).join(" "), hits = 0;
for (const m of text.matchAll(/k(\\d*7)\\b/g)) hits += m[1].length;
const c = document.getElementById("c").getContext("2d");
for (let i = 0; i < 20000; i++) {
  c.beginPath(); c.arc(i % 1200, (i * 37) % 800, 5 + i % 20, 0, 6.28);
  c.strokeStyle = "rgb(" + i % 255 + ",90," + hits % 255 + ")"; c.stroke();
}
const d = document.getElementById("d");
for (let i = 0; i < 3000; i++) {
  const e = document.createElement("div"); e.textContent = "item " + a[i * 10];
  e.style.cssText = "flex:1 0 " + (40 + i % 80) + "px;margin:1px;background:#" + (i % 4096).toString(16);
  d.appendChild(e);
}
</script></body></html>
"""


def write_pages(folder):
    """Writes the pages into folder; returns their file names."""
    pages = {"flame.html": flame_svg(), "table.html": big_table(), "script.html": script_heavy()}
    for name, text in pages.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)
    return sorted(pages)
