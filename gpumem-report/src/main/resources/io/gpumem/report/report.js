// gpumem report: draws the timeline and segment maps from the JSON blocks embedded in the page.
// No request of any kind: everything it needs is in the page. Any script error is shown in #script-errors
// and leaves the body marked data-render="error"; a full draw marks it data-render="ok".
(function () {
  "use strict";
  var errors = [];
  window.onerror = function (msg, src, line, col) {
    errors.push(String(msg) + " (line " + line + ":" + col + ")");
    var box = document.getElementById("script-errors");
    if (box) { box.hidden = false; box.textContent = "script error: " + errors.join("\n"); }
    document.body.setAttribute("data-render", "error");
    return false;
  };
  // A request the page's Content-Security-Policy blocked is a bug of the page: show it like a script error.
  document.addEventListener("securitypolicyviolation", function (evt) {
    window.onerror("blocked request to " + evt.blockedURI + " (" + evt.violatedDirective + ")", "", 0, 0);
  });
  var SVG = "http" + "://www.w3.org/2000/svg"; // the SVG namespace name, not a request
  var PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7", "#86bcb6", "#bab0ac"];
  var STATE_FILL = ["#4e79a7", "#f2b134", "#f4a6a6"];
  var STATE_NAME = ["allocated", "pending free (waiting on stream events)", "free (cached)"];

  function el(name, attrs, parent) {
    var e = document.createElementNS(SVG, name);
    for (var k in attrs) { if (Object.prototype.hasOwnProperty.call(attrs, k)) { e.setAttribute(k, attrs[k]); } }
    if (parent) { parent.appendChild(e); }
    return e;
  }
  // A byte count as the page's text and gpumem analyze print it (ByteSize.format, PyTorch's format_size): up to 1024
  // bytes "n bytes"; up to 1 MiB KiB, up to 1 GiB MiB, above GiB (no larger unit), the bounds inclusive (1 MiB is
  // "1024.00 KiB"); two decimals rounded half to even on the exact value (1.125 -> "1.12"), where toFixed rounds a
  // tie up. So the figures the script draws (OOM label, segment maps, hover text) read as the same figures in text.
  function fmt(b) {
    var neg = b < 0; b = Math.abs(b);
    if (b <= 1024) { return (neg ? "-" : "") + b + " bytes"; }
    var shift = b <= 1048576 ? 10 : b <= 1073741824 ? 20 : 30;
    return (neg ? "-" : "") + twoDecimals(b, shift) + " " + (shift === 10 ? "KiB" : shift === 20 ? "MiB" : "GiB");
  }
  // b / 2^shift with two decimals, half to even. A tie (b / 2^shift * 100 = m + 1/2 exactly) is b / 2^(shift-3) odd,
  // as 100 / 2^shift = 25 / 2^(shift-2); then v * 100 is exact and m is its floor.
  function twoDecimals(b, shift) {
    var v = b / Math.pow(2, shift);
    if (b / Math.pow(2, shift - 3) % 2 === 1) {
      var m = Math.floor(v * 100);
      return ((m % 2 === 0 ? m : m + 1) / 100).toFixed(2);
    }
    return v.toFixed(2);
  }
  var tip = document.createElement("div");
  tip.id = "tooltip";
  document.body.appendChild(tip);
  function showTip(evt, text) {
    tip.textContent = text;
    tip.style.display = "block";
    var x = evt.clientX + 14, y = evt.clientY + 14;
    if (x + 470 > window.innerWidth) { x = Math.max(4, evt.clientX - 470); }
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }
  function hideTip() { tip.style.display = "none"; }

  function niceStep(range, count) {
    var raw = range / count, pow = Math.pow(10, Math.floor(Math.log(raw) / Math.LN10)), n = raw / pow;
    return (n < 1.5 ? 1 : n < 3.5 ? 2 : n < 7.5 ? 5 : 10) * pow;
  }

  // Stacks of the timeline: by allocation site (top sites, then the rest) or, when the page has them, by category.
  function stacking(data, mode) {
    var tl = data.timeline;
    if (mode === "category" && data.cats) {
      return {mode: "category", names: data.cats.names, rows: data.cats.stack};
    }
    return {mode: "site", names: tl.top.map(function (s) { return data.sites[s]; }).concat(["other sites"]), rows: tl.stack};
  }

  function drawTimeline(box, data, mode) {
    var tl = data.timeline, n = tl.x.length;
    var W = Math.max(600, box.clientWidth || 1100), H = 300, L = 78, R = 16, T = 16, B = 28;
    var by = stacking(data, mode);
    var cols = by.names.length, names = by.names, rows = by.rows;
    var full = [0, Math.max(1, data.entries - 1)];
    var dom = full.slice();
    while (box.firstChild) { box.removeChild(box.firstChild); }
    box.setAttribute("data-stack", by.mode);
    var svg = el("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, "class": "timeline-svg " + by.mode}, box);
    var legend = document.createElement("div");
    legend.className = "legend";
    box.appendChild(legend);
    names.forEach(function (name, c) {
      var item = document.createElement("span");
      var sw = document.createElement("span");
      sw.className = "sw"; sw.style.background = PALETTE[c % PALETTE.length];
      item.appendChild(sw); item.appendChild(document.createTextNode(name));
      legend.appendChild(item);
    });
    var resItem = document.createElement("span");
    resItem.textContent = tl.res ? "\u2014 reserved" : "(reserved not recorded)";
    resItem.style.color = "#1d2329"; resItem.style.fontWeight = "600";
    legend.appendChild(resItem);
    if (data.oom) {
      var oomItem = document.createElement("span");
      oomItem.textContent = "| OOM (request that failed)";
      oomItem.style.color = "#d62728"; oomItem.style.fontWeight = "600";
      legend.appendChild(oomItem);
    }
    function render() {
      while (svg.firstChild) { svg.removeChild(svg.firstChild); }
      var a = 0, b = n - 1;
      while (a < n - 1 && tl.x[a + 1] < dom[0]) { a++; }
      while (b > 0 && tl.x[b - 1] > dom[1]) { b--; }
      var ymax = 1;
      for (var i = a; i <= b; i++) { ymax = Math.max(ymax, tl.res ? tl.res[i] : 0, tl.alloc[i]); }
      ymax *= 1.08;
      var sx = function (x) { return L + (x - dom[0]) / (dom[1] - dom[0]) * (W - L - R); };
      var sy = function (y) { return H - B - y / ymax * (H - T - B); };
      el("rect", {x: L, y: T, width: W - L - R, height: H - T - B, fill: "#fff"}, svg);
      var step = Math.max(1, niceStep(ymax, 5)); // whole bytes: nothing allocated must not read "0.6000000000000001 bytes"
      for (var v = 0; v <= ymax; v += step) {
        el("line", {x1: L, x2: W - R, y1: sy(v), y2: sy(v), stroke: "#eef1f4"}, svg);
        el("text", {x: L - 6, y: sy(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#5b6670"}, svg).textContent = fmt(v);
      }
      var xstep = Math.max(1, niceStep(dom[1] - dom[0], 8));
      // ticks name entries the trace has (a trace of one entry spans [0, 1] but has no entry #1)
      for (var xv = Math.ceil(dom[0] / xstep) * xstep; xv <= Math.min(dom[1], data.entries - 1); xv += xstep) {
        el("text", {x: sx(xv), y: H - 8, "text-anchor": "middle", "font-size": 11, fill: "#5b6670"}, svg).textContent = "#" + Math.round(xv);
      }
      if (n > 0) {
        var base = new Array(b - a + 1).fill(0);
        for (var c = 0; c < cols; c++) {
          var top = [], bottom = [];
          for (var j = a; j <= b; j++) {
            var y0 = base[j - a], y1 = y0 + rows[j][c];
            bottom.push(sx(tl.x[j]).toFixed(1) + "," + sy(y0).toFixed(1));
            top.push(sx(tl.x[j]).toFixed(1) + "," + sy(y1).toFixed(1));
            base[j - a] = y1;
          }
          el("polygon", {points: top.concat(bottom.reverse()).join(" "), fill: PALETTE[c % PALETTE.length], "fill-opacity": 0.85, "class": "band"}, svg);
        }
        if (tl.res) { // absent for a file that records requests only
          var line = [];
          for (var k = a; k <= b; k++) { line.push(sx(tl.x[k]).toFixed(1) + "," + sy(tl.res[k]).toFixed(1)); }
          el("polyline", {points: line.join(" "), fill: "none", stroke: "#1d2329", "stroke-width": 1.6}, svg);
        }
      }
      if (data.peak && data.peak.index >= dom[0] && data.peak.index <= dom[1]) {
        var px = sx(data.peak.index), py = sy(data.peak.allocated);
        el("circle", {cx: px, cy: py, r: 4, fill: "#fff", stroke: "#1d2329", "stroke-width": 1.5}, svg);
        el("text", {x: px + 6, y: Math.max(T + 10, py - 6), "font-size": 11, fill: "#1d2329"}, svg).textContent = "peak allocated";
      }
      if (data.oom && data.oom.index >= dom[0] - 1 && data.oom.index <= dom[1] + 1) {
        var ox = Math.min(sx(data.oom.index), W - R - 2);
        el("line", {x1: ox, x2: ox, y1: T, y2: H - B, stroke: "#d62728", "stroke-width": 3, "class": "oom-marker"}, svg);
        var label = el("text", {x: ox - 6, y: T + 14, "text-anchor": "end", "font-size": 13, "font-weight": 700, fill: "#d62728"}, svg);
        label.textContent = "OOM: asked " + fmt(data.oom.request);
      }
      el("rect", {x: L, y: T, width: W - L - R, height: H - T - B, fill: "none", stroke: "#c4cbd2"}, svg);
      guide = el("line", {x1: 0, x2: 0, y1: T, y2: H - B, stroke: "#1d2329", "stroke-dasharray": "3,3", visibility: "hidden"}, svg);
      brush = el("rect", {x: 0, y: T, width: 0, height: H - T - B, fill: "#4e79a7", "fill-opacity": 0.15, visibility: "hidden"}, svg);
      state.sx = sx; state.a = a; state.b = b;
    }
    var guide, brush, state = {}, dragFrom = null;
    function toX(evt) {
      var r = svg.getBoundingClientRect();
      var px = (evt.clientX - r.left) * (W / r.width);
      return {px: px, x: dom[0] + (px - L) / (W - L - R) * (dom[1] - dom[0])};
    }
    svg.addEventListener("mousemove", function (evt) {
      var p = toX(evt);
      if (dragFrom !== null) {
        brush.setAttribute("visibility", "visible");
        brush.setAttribute("x", Math.min(dragFrom.px, p.px));
        brush.setAttribute("width", Math.abs(p.px - dragFrom.px));
        return;
      }
      if (n === 0 || p.px < L || p.px > W - R) { hideTip(); guide.setAttribute("visibility", "hidden"); return; }
      var best = state.a;
      for (var i = state.a; i <= state.b; i++) { if (Math.abs(tl.x[i] - p.x) < Math.abs(tl.x[best] - p.x)) { best = i; } }
      guide.setAttribute("x1", state.sx(tl.x[best])); guide.setAttribute("x2", state.sx(tl.x[best]));
      guide.setAttribute("visibility", "visible");
      var lines = ["entry #" + tl.x[best] + (tl.t ? " (" + (tl.t[best] / 1000).toFixed(1) + " ms)" : ""),
        "allocated " + fmt(tl.alloc[best]), tl.res ? "reserved " + fmt(tl.res[best]) : "reserved not recorded"];
      var parts = [];
      for (var c = 0; c < cols; c++) { if (rows[best][c] > 0) { parts.push([rows[best][c], names[c]]); } }
      parts.sort(function (u, v) { return v[0] - u[0]; });
      parts.slice(0, 8).forEach(function (q) { lines.push("  " + fmt(q[0]) + "  " + q[1]); });
      if (data.oom && Math.abs(tl.x[best] - data.oom.index) <= Math.max(1, (dom[1] - dom[0]) / 200)) {
        lines.push("OOM here: a request of " + fmt(data.oom.request) + " failed");
      }
      showTip(evt, lines.join("\n"));
    });
    svg.addEventListener("mouseleave", function () { hideTip(); if (guide) { guide.setAttribute("visibility", "hidden"); } });
    svg.addEventListener("mousedown", function (evt) { dragFrom = toX(evt); evt.preventDefault(); });
    window.addEventListener("mouseup", function (evt) {
      if (dragFrom === null) { return; }
      var p = toX(evt), x0 = Math.min(dragFrom.x, p.x), x1 = Math.max(dragFrom.x, p.x);
      dragFrom = null;
      if (x1 - x0 >= 2) { dom = [Math.max(full[0], x0), Math.min(full[1], x1)]; }
      render();
    });
    svg.addEventListener("dblclick", function () { dom = full.slice(); render(); });
    render();
  }

  function drawSegmentMap(box, data, map) {
    var segs = map.segs, W = Math.max(600, box.clientWidth || 1100), GAP = 3, ROW = 18, ROWGAP = 7, PAD = 8;
    var total = 0, i, j;
    for (i = 0; i < segs.length; i++) { for (j = 0; j < segs[i][4].length; j++) { total += segs[i][4][j][0]; } }
    if (segs.length === 0) { box.textContent = "no segments at this moment"; return; }
    var rows = Math.min(22, Math.max(3, Math.ceil(segs.length / 12)));
    var usable = W - 2 * PAD;
    var scale = Math.max(1e-12, (usable * rows - segs.length * (GAP + 1)) / Math.max(1, total));
    var pieces = [], x = 0, row = 0;
    for (i = 0; i < segs.length; i++) {
      var size = 0;
      for (j = 0; j < segs[i][4].length; j++) { size += segs[i][4][j][0]; }
      var width = Math.max(1, size * scale), offsetPx = 0;
      if (x > 0 && x + Math.min(width, 40) > usable) { row++; x = 0; }
      while (offsetPx < width - 1e-9) {
        var room = usable - x;
        var take = Math.min(room, width - offsetPx);
        pieces.push({seg: i, row: row, x: x, from: offsetPx / width, to: (offsetPx + take) / width, size: size});
        offsetPx += take; x += take;
        if (x >= usable - 1e-9) { row++; x = 0; }
      }
      x += GAP;
      if (x >= usable) { row++; x = 0; }
    }
    var H = (row + 1) * (ROW + ROWGAP) + PAD * 2 + 20;
    var svg = el("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, "class": "segmap-svg"}, box);
    var largest = map.largest, largestRects = [];
    pieces.forEach(function (p) {
      var seg = segs[p.seg], blocks = seg[4], y = PAD + p.row * (ROW + ROWGAP), pxw = (p.to - p.from) * p.size * scale;
      var segX = PAD + p.x - p.from * p.size * scale;
      el("rect", {x: PAD + p.x, y: y, width: pxw, height: ROW, fill: "#e8ebee"}, svg);
      var off = 0;
      for (var b = 0; b < blocks.length; b++) {
        var bs = off / p.size, be = (off + blocks[b][0]) / p.size;
        off += blocks[b][0];
        var s0 = Math.max(bs, p.from), s1 = Math.min(be, p.to);
        if (s1 <= s0) { continue; }
        var rx = segX + s0 * p.size * scale, rw = (s1 - s0) * p.size * scale;
        var r = el("rect", {x: rx, y: y, width: Math.max(rw, 0.35), height: ROW, fill: STATE_FILL[blocks[b][1]],
          "data-s": p.seg, "data-b": b, "class": "blk st" + blocks[b][1]}, svg);
        if (seg[2] === 0 && blocks[b][1] === 0) { r.setAttribute("fill-opacity", 0.7); }
        if (largest[0] === p.seg && largest[1] === b) { largestRects.push([rx, y, rw]); }
      }
      if (p.from === 0) { el("line", {x1: PAD + p.x, x2: PAD + p.x, y1: y - 2, y2: y + ROW + 2, stroke: "#1d2329", "stroke-width": 1.2}, svg); }
    });
    largestRects.forEach(function (q) {
      el("rect", {x: q[0] - 1, y: q[1] - 2, width: Math.max(q[2], 2) + 2, height: ROW + 4, fill: "none", stroke: "#d62728", "stroke-width": 2.5, "class": "largest-free"}, svg);
    });
    var ly = H - 10, lx = PAD;
    [0, 1, 2].forEach(function (s) {
      el("rect", {x: lx, y: ly - 9, width: 11, height: 11, fill: STATE_FILL[s]}, svg);
      var t = el("text", {x: lx + 15, y: ly, "font-size": 11, fill: "#1d2329"}, svg);
      t.textContent = STATE_NAME[s];
      lx += 30 + STATE_NAME[s].length * 6.2;
    });
    el("rect", {x: lx, y: ly - 10, width: 13, height: 13, fill: "none", stroke: "#d62728", "stroke-width": 2.5}, svg);
    var lt = el("text", {x: lx + 18, y: ly, "font-size": 11, fill: "#1d2329"}, svg);
    lt.textContent = largest[0] >= 0 ? "largest free block: " + fmt(segs[largest[0]][4][largest[1]][0]) : "no free block";
    lx += 200;
    el("text", {x: lx, y: ly, "font-size": 11, fill: "#5b6670"}, svg).textContent =
      segs.length + " segments, " + fmt(total) + " reserved; black tick = segment start";
    svg.addEventListener("mousemove", function (evt) {
      var t = evt.target;
      if (!t.getAttribute || t.getAttribute("data-s") === null) { hideTip(); return; }
      var seg = segs[+t.getAttribute("data-s")], blk = seg[4][+t.getAttribute("data-b")];
      var segSize = 0, off = 0;
      for (var q = 0; q < seg[4].length; q++) { if (q < +t.getAttribute("data-b")) { off += seg[4][q][0]; } segSize += seg[4][q][0]; }
      var lines = [STATE_NAME[blk[1]] + " block of " + fmt(blk[0]) + (blk[1] === 0 && blk[2] > 0 ? " (requested " + fmt(blk[2]) + ")" : ""),
        "segment " + seg[0] + " +" + fmt(off) + ": " + fmt(segSize) + ", " + (seg[2] === 0 ? "small" : "large") + " pool, stream " + seg[1] + (seg[3] ? ", expandable" : "")];
      if (blk[1] !== 2) {
        lines.push("site: " + (blk[3] >= 0 ? data.sites[blk[3]] : "unknown"));
        lines.push("lifetime: " + (blk[4] >= 0 ? "allocated at entry #" + blk[4] : "allocated before the trace") + ", " +
          (blk[5] >= 0 ? "freed at entry #" + blk[5] : "never freed in the trace"));
      }
      showTip(evt, lines.join("\n"));
    });
    svg.addEventListener("mouseleave", hideTip);
  }

  function wireToggle(section, box, data, initial) {
    var radios = section.querySelectorAll(".stack-toggle input");
    for (var r = 0; r < radios.length; r++) {
      radios[r].checked = radios[r].value === initial;
      radios[r].addEventListener("change", function (evt) {
        if (evt.target.checked) { drawTimeline(box, data, evt.target.value); }
      });
    }
  }

  var drawn = 0;
  var sections = document.querySelectorAll("section.device");
  for (var s = 0; s < sections.length; s++) {
    var section = sections[s];
    var script = section.querySelector("script.report-data");
    var data = JSON.parse(script.textContent);
    var tlBox = section.querySelector(".timeline");
    if (tlBox) {
      // the stack toggle redraws the timeline; #stack=category in the address opens every page on the categories
      var initial = data.cats && window.location.hash === "#stack=category" ? "category" : "site";
      drawTimeline(tlBox, data, initial);
      drawn++;
      wireToggle(section, tlBox, data, initial);
    }
    var maps = section.querySelectorAll(".segmap");
    for (var m = 0; m < maps.length; m++) {
      drawSegmentMap(maps[m], data, data.maps[+maps[m].getAttribute("data-map")]);
      drawn++;
    }
  }
  var select = document.getElementById("device-select");
  if (select) {
    select.addEventListener("change", function () {
      for (var i = 0; i < sections.length; i++) { sections[i].hidden = sections[i].getAttribute("data-device") !== select.value; }
    });
  }
  if (errors.length === 0) {
    document.body.setAttribute("data-render", "ok");
    document.body.setAttribute("data-charts", String(drawn));
  }
})();
