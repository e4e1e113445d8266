// pfr flame graph: renders the JSON tree of `pfr flame --format json` (or a diff) into a
// container. Root at the bottom, width = share of the total, click a frame to zoom into it,
// search highlights matches, hover shows name, value, self and percent.
// Used by `pfr flame --format html` and by the `pfr serve` page: PfrFlame.mount(el, data, opts)
// with opts {search, zoom (initial node id), noHash (leave the URL alone), onChange (called with
// {zoom, search} after every change)}. The returned api's destroy() detaches it from the window.
(function (global) {
  'use strict';
  var FH = 18; // frame height in px

  function fmtNum(v, digits) {
    var a = Math.abs(v);
    return a >= 100 || v === Math.round(v) ? v.toFixed(0) : v.toPrecision(digits || 3);
  }
  function fmtValue(v, unit, perSecond) {
    var steps, names;
    if (unit === 'nanoseconds') { steps = [1, 1e3, 1e6, 1e9]; names = ['ns', 'µs', 'ms', 's']; }
    else if (unit === 'bytes') { steps = [1, 1024, 1048576, 1073741824, 1099511627776]; names = ['B', 'KiB', 'MiB', 'GiB', 'TiB']; }
    else { steps = [1, 1e3, 1e6, 1e9]; names = ['', 'k', 'M', 'G']; }
    var i = 0;
    while (i + 1 < steps.length && Math.abs(v) >= steps[i + 1]) i++;
    var s = fmtNum(v / steps[i]) + (names[i] ? ' ' + names[i] : '');
    return s + (perSecond ? '/s' : '');
  }
  function pct(part, whole) { return whole > 0 ? (100 * part / whole).toFixed(2) + '%' : '0%'; }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // Flatten the nested tree: parents before children, x = offset inside the root in value units.
  function flatten(root) {
    var nodes = [], stack = [[root, -1, 0, 0]];
    while (stack.length) {
      var top = stack.pop(), n = top[0];
      var id = nodes.length;
      nodes.push({ n: n, parent: top[1], x: top[2], d: top[3], end: 0 });
      var kids = n.children || [], x = top[2], list = [];
      for (var i = 0; i < kids.length; i++) { list.push([kids[i], id, x, top[3] + 1]); x += kids[i].value; }
      for (var j = list.length - 1; j >= 0; j--) stack.push(list[j]);
    }
    // end = one past the last descendant (preorder), so subtrees are index ranges.
    for (var k = nodes.length - 1; k >= 0; k--) {
      if (nodes[k].end < k + 1) nodes[k].end = k + 1;
      var p = nodes[k].parent;
      if (p >= 0 && nodes[p].end < nodes[k].end) nodes[p].end = nodes[k].end;
    }
    return nodes;
  }

  function mount(container, data, opts) {
    opts = opts || {};
    var diff = data.kind === 'diff';
    var nodes = flatten(data.root);
    var total = data.root.value || 0;
    var state = { zoom: 0, search: '' };

    container.innerHTML = '';
    container.classList.add('pfr');
    var head = el('div', 'pfr-head');
    head.appendChild(el('div', 'pfr-title', data.title || 'Flame graph'));
    head.appendChild(el('div', 'pfr-sub', data.subtitle || ''));
    var bar = el('div', 'pfr-bar');
    var reset = el('button', 'pfr-reset', 'Reset zoom');
    reset.type = 'button';
    var input = el('input', 'pfr-search');
    input.type = 'search';
    input.placeholder = 'Search (regex)';
    var matched = el('span', 'pfr-matched', '');
    var info = el('span', 'pfr-info', '');
    bar.appendChild(reset); bar.appendChild(input); bar.appendChild(matched); bar.appendChild(info);
    head.appendChild(bar);
    container.appendChild(head);
    var graph = el('div', 'pfr-graph');
    container.appendChild(graph);
    var tip = el('div', 'pfr-tip');
    tip.style.display = 'none';
    container.appendChild(tip);
    if (diff) {
      var legend = el('div', 'pfr-legend', 'red: more in the comparison than in the baseline, green: less; ' +
        'width: mean of both (per second); shade: size of the change');
      container.appendChild(legend);
    }

    function color(nd) {
      if (diff) return nd.n.color || '#ddd';
      var p = data.packages && data.packages[nd.n.package];
      return p ? p.color : '#e0a060';
    }
    function packageName(nd) {
      var p = data.packages && data.packages[nd.n.package];
      return p ? p.name : '';
    }

    function render() {
      graph.textContent = '';
      var z = nodes[state.zoom], zx = z.x, zw = z.n.value || 1;
      var width = graph.clientWidth || 1200;
      var minPx = 0.5;
      var frag = document.createDocumentFragment();
      // ancestors of the zoomed frame: full width, dimmed
      for (var a = z.parent; a >= 0; a = nodes[a].parent) frag.appendChild(frame(a, 0, 100, true, width));
      // the zoomed frame and its descendants, narrow subtrees skipped
      var i = state.zoom, deepest = z.d;
      while (i < z.end) {
        var nd = nodes[i];
        var w = nd.n.value / zw;
        if (w * width < minPx) { i = nd.end; continue; }
        frag.appendChild(frame(i, 100 * (nd.x - zx) / zw, 100 * w, false, w * width));
        if (nd.d > deepest) deepest = nd.d;
        i++;
      }
      // as tall as the frames drawn: a deep but invisible stack must not leave a blank page
      graph.style.height = ((deepest + 1) * FH) + 'px';
      graph.appendChild(frag);
      reset.disabled = state.zoom === 0;
      highlight();
    }

    function frame(id, left, w, anc, px) {
      var nd = nodes[id];
      // too narrow for a readable label: a bare bar (the tooltip still names it)
      var narrow = px < 24;
      var f = el('div', 'pfr-frame' + (anc ? ' pfr-anc' : '') + (narrow ? ' pfr-narrow' : ''),
        narrow ? '' : nd.n.name);
      f.style.left = left + '%';
      f.style.width = 'calc(' + w + '% - 1px)';
      f.style.bottom = (nd.d * FH) + 'px';
      f.style.background = color(nd);
      f.setAttribute('data-id', id);
      return f;
    }

    function searchRe() {
      var q = state.search;
      if (!q) return null;
      try { return new RegExp(q, 'i'); } catch (e) {
        return new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i');
      }
    }

    function highlight() {
      var re = searchRe();
      var frames = graph.children;
      for (var i = 0; i < frames.length; i++) {
        var nd = nodes[+frames[i].getAttribute('data-id')];
        frames[i].classList.toggle('pfr-match', !!re && re.test(nd.n.name));
      }
      if (!re) { matched.textContent = ''; return; }
      // share of the total in matching frames, a match inside a match counted once
      var cover = 0, count = 0, i2 = 0;
      while (i2 < nodes.length) {
        if (i2 > 0 && re.test(nodes[i2].n.name)) { cover += nodes[i2].n.value; count++; i2 = nodes[i2].end; }
        else i2++;
      }
      matched.textContent = 'Matched: ' + pct(cover, total) + ' (' + count + ' frames)';
    }

    function tooltip(id, ev) {
      var nd = nodes[id], n = nd.n, z = nodes[state.zoom].n;
      var lines = [n.name, 'package: ' + packageName(nd)];
      if (!diff) {
        lines.push('value: ' + fmtValue(n.value, data.unit) + ' (' + pct(n.value, total) + ' of total' +
          (state.zoom ? ', ' + pct(n.value, z.value) + ' of zoomed frame' : '') + ')');
        lines.push('self: ' + fmtValue(n.self, data.unit) + ' (' + pct(n.self, total) + ')');
      } else {
        lines.push('baseline: ' + fmtValue(n.base, data.unit, true) + ', comparison: ' + fmtValue(n.comp, data.unit, true));
        lines.push('change: ' + (n.base > 0 ? ((100 * (n.comp - n.base) / n.base).toFixed(1) + '%') : (n.comp > 0 ? 'new' : '=')));
        lines.push('self: ' + fmtValue(n.base_self, data.unit, true) + ' -> ' + fmtValue(n.comp_self, data.unit, true));
      }
      tip.textContent = lines.join('\n');
      tip.style.display = 'block';
      var r = container.getBoundingClientRect();
      var x = ev.clientX - r.left + 12, y = ev.clientY - r.top + 12;
      if (x + tip.offsetWidth > r.width) x = Math.max(0, r.width - tip.offsetWidth - 4);
      if (y + tip.offsetHeight > r.height) y = Math.max(0, ev.clientY - r.top - tip.offsetHeight - 8);
      tip.style.left = x + 'px';
      tip.style.top = y + 'px';
      info.textContent = n.name;
    }

    function saveHash() {
      if (opts.onChange) opts.onChange({ zoom: state.zoom, search: state.search });
      if (opts.noHash) return;
      var h = [];
      if (state.zoom) h.push('zoom=' + state.zoom);
      if (state.search) h.push('search=' + encodeURIComponent(state.search));
      var s = h.length ? '#' + h.join('&') : ' ';
      if (global.history && history.replaceState) history.replaceState(null, '', s === ' ' ? location.pathname + location.search : s);
    }
    function loadHash() {
      if (opts.noHash || !location.hash) return;
      location.hash.slice(1).split('&').forEach(function (kv) {
        var p = kv.indexOf('='), k = kv.slice(0, p), v;
        if (p < 0) return;
        try { v = decodeURIComponent(kv.slice(p + 1)); } catch (e) { return; } // a mangled link
        if (k === 'zoom' && +v > 0 && +v < nodes.length) state.zoom = +v;
        if (k === 'search') state.search = v;
      });
    }

    graph.addEventListener('click', function (ev) {
      var f = ev.target.closest('.pfr-frame');
      if (!f) return;
      api.zoomTo(+f.getAttribute('data-id'));
    });
    graph.addEventListener('mousemove', function (ev) {
      var f = ev.target.closest('.pfr-frame');
      if (f) tooltip(+f.getAttribute('data-id'), ev); else tip.style.display = 'none';
    });
    graph.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
    reset.addEventListener('click', function () { api.zoomTo(0); });
    input.addEventListener('input', function () { api.search(input.value); });
    var lastWidth = 0;
    function onResize() {
      if (graph.clientWidth !== lastWidth) { lastWidth = graph.clientWidth; render(); }
    }
    global.addEventListener('resize', onResize);

    var api = {
      zoomTo: function (id) { state.zoom = id >= 0 && id < nodes.length ? id : 0; render(); saveHash(); },
      search: function (q) { state.search = q || ''; if (input.value !== state.search) input.value = state.search; highlight(); saveHash(); },
      state: function () { return { zoom: state.zoom, search: state.search }; },
      destroy: function () { global.removeEventListener('resize', onResize); },
      nodes: nodes
    };
    loadHash();
    if (opts.zoom > 0 && opts.zoom < nodes.length && !state.zoom) state.zoom = opts.zoom;
    input.value = state.search;
    if (!state.search && opts.search) state.search = input.value = opts.search;
    render();
    lastWidth = graph.clientWidth;
    return api;
  }

  global.PfrFlame = { mount: mount, formatValue: fmtValue };
})(window);
