// Interaction for pfr's SVG flame graphs: tooltip line, click to zoom, search.
// Frames carry their layout as fractions of the total (data-x, data-w) and their depth (data-d).
(function () {
  'use strict';
  var svg = document.querySelector('svg');
  var W = +svg.getAttribute('width');
  var CHAR_W = 7;
  var items = [];
  var all = document.querySelectorAll('#frames > g.f');
  for (var i = 0; i < all.length; i++) {
    var g = all[i];
    var title = g.querySelector('title').textContent;
    items.push({
      g: g, r: g.querySelector('rect'), t: g.querySelector('text'),
      x: +g.getAttribute('data-x'), w: +g.getAttribute('data-w'), d: +g.getAttribute('data-d'),
      name: title.split('\n')[0], info: title.replace(/\n/g, ' | ')
    });
    g.pfrItem = items[items.length - 1];
  }
  var details = document.getElementById('details');
  var reset = document.getElementById('reset');
  var search = document.getElementById('search');
  var matched = document.getElementById('matched');
  var EPS = 1e-9;

  function label(name, wpx) {
    var fit = Math.floor((wpx - 6) / CHAR_W);
    if (fit < 3) return '';
    return name.length <= fit ? name : name.slice(0, fit - 2) + '..';
  }

  function place(it, x, w) {
    it.r.setAttribute('x', (x * W).toFixed(2));
    var wpx = w * W;
    it.r.setAttribute('width', Math.max(wpx - 0.5, 0).toFixed(2));
    it.t.setAttribute('x', (x * W + 3).toFixed(2));
    it.t.textContent = label(it.name, wpx);
  }

  function zoom(z) {
    for (var i = 0; i < items.length; i++) {
      var it = items[i];
      it.g.classList.remove('anc', 'hide');
      if (!z) { place(it, it.x, it.w); continue; }
      var inside = it.d >= z.d && it.x >= z.x - EPS && it.x + it.w <= z.x + z.w + EPS;
      var above = it.d < z.d && it.x <= z.x + EPS && it.x + it.w >= z.x + z.w - EPS;
      if (inside) place(it, (it.x - z.x) / z.w, it.w / z.w);
      else if (above) { place(it, 0, 1); it.g.classList.add('anc'); }
      else it.g.classList.add('hide');
    }
    reset.style.display = z && z.d > 0 ? '' : 'none';
    doSearch();
  }

  function doSearch() {
    var q = search ? search.value : '';
    var re = null;
    if (q) {
      try { re = new RegExp(q, 'i'); } catch (e) {
        re = new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i');
      }
    }
    var spans = [];
    for (var i = 0; i < items.length; i++) {
      var it = items[i];
      var m = !!re && re.test(it.name);
      it.r.classList.toggle('match', m);
      if (m) spans.push([it.x, it.x + it.w]);
    }
    // Share of the total covered by matches, nested matches counted once.
    spans.sort(function (a, b) { return a[0] - b[0]; });
    var cover = 0, end = -1;
    for (var k = 0; k < spans.length; k++) {
      var s = Math.max(spans[k][0], end);
      if (spans[k][1] > s) { cover += spans[k][1] - s; end = spans[k][1]; }
    }
    matched.textContent = re ? 'Matched: ' + (100 * cover).toFixed(2) + '%' : '';
  }

  svg.addEventListener('click', function (e) {
    var g = e.target.closest ? e.target.closest('g.f') : null;
    if (g && g.pfrItem) zoom(g.pfrItem);
  });
  svg.addEventListener('mouseover', function (e) {
    var g = e.target.closest ? e.target.closest('g.f') : null;
    if (g && g.pfrItem) details.textContent = g.pfrItem.info;
  });
  reset.addEventListener('click', function () { zoom(null); });
  if (search) search.addEventListener('input', doSearch);
  doSearch();
})();
