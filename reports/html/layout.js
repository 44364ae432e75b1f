// The pure layout of the HTML report's space-time diagram: the time axis (linear, or with idle gaps squeezed
// into labelled breaks), its tick labels, label placement without overlap, and the bands that stand for
// repeated messages. No DOM here: the page (report.js) draws with these functions, and node runs their unit
// tests (tests/reports/html_layout_test.js).
//
// An axis is a list of pieces over true time, each either linear (one scale, S px per second, shared by every
// linear piece, so a distance means the same time everywhere) or a break: an idle gap drawn at a fixed width,
// with its duration written in it, whatever the zoom. Nothing happens inside a break, by construction.
var LocksimLayout = (function () {
  'use strict';

  var BREAK_MIN = 56;   // px: the narrowest a squeezed gap is drawn (room for its label)
  var BREAK_GAIN = 3;   // a gap is squeezed only if, unsqueezed, it would be this many breaks wide
  var BREAK_SHARE = 0.08;  // and lasts at least this share of the run
  var MAX_BREAKS = 60;  // and at most this many (at most half the width goes to breaks)
  var TICK_SPACING = 90;  // px between regular ticks, at least

  // Text width in px of `text` at `size` px, when no better measure is given (roughly DejaVu Sans).
  function estimate(text, size) { return String(text).length * (size || 12) * 0.6; }

  // A duration, three significant figures: "≈ 9.95 s".
  function durationText(d) {
    var s = d >= 100 ? d.toFixed(0) : d >= 10 ? d.toFixed(1) : d >= 1 ? d.toFixed(2) : d >= 0.001 ?
        d.toFixed(Math.min(6, 2 - Math.floor(Math.log10(d)))) : d.toExponential(1);
    return '\u2248 ' + s + ' s';
  }

  // A time in seconds with `digits` decimals, trailing zeros dropped (the value shown is exact to them).
  function secondsText(t, digits) {
    var s = t.toFixed(Math.max(0, Math.min(9, digits)));
    if (s.indexOf('.') >= 0) s = s.replace(/0+$/, '').replace(/\.$/, '');
    if (s === '-0') s = '0';
    return s + ' s';
  }

  function uniqueSorted(ts, end) {
    var a = [0, end];
    for (var i = 0; i < ts.length; i++) a.push(Math.max(0, Math.min(end, ts[i])));
    a.sort(function (x, y) { return x - y; });
    var out = [a[0]];
    for (i = 1; i < a.length; i++) if (a[i] > out[out.length - 1]) out.push(a[i]);
    return out;
  }

  // The axis for instants `ts` (seconds; every instant the picture draws) over [0, end], `avail` px wide at
  // zoom 1. With `squeeze`, the longest idle gaps become breaks while that buys room; `measure(text, size)`
  // gives a label's width in px.
  function buildAxis(ts, end, avail, squeeze, measure) {
    measure = measure || estimate;
    end = Math.max(end, 1e-9);
    var P = uniqueSorted(ts, end), chosen = {}, D = end, W = 0, n = 0;
    if (squeeze) {
      var gaps = [];
      for (var i = 1; i < P.length; i++) gaps.push({ i: i, g: P[i] - P[i - 1] });
      gaps.sort(function (a, b) { return b.g - a.g || a.i - b.i; });
      for (var k = 0; k < gaps.length && n < MAX_BREAKS; k++) {
        var gp = gaps[k], text = durationText(gp.g), w = Math.max(BREAK_MIN, Math.ceil(measure(text, 11)) + 12);
        var rest = D - gp.g;
        if (gp.g < end * BREAK_SHARE) break;
        if (rest <= end * 1e-9) continue;
        if (W + w > avail / 2) break;
        if (gp.g * (avail - W) / D < BREAK_GAIN * w) break;
        chosen[gp.i] = { text: text, w: w };
        D = rest; W += w; n++;
      }
    }
    var pieces = [], lin = 0, brk = 0;
    function push(p) { p.lin = lin; p.brk = brk; pieces.push(p); if (p.kind === 'lin') lin += p.t1 - p.t0; else brk += p.w; }
    var start = 0;
    for (var j = 1; j < P.length; j++) {
      if (!chosen[j]) continue;
      if (P[j - 1] > start || pieces.length === 0 || pieces[pieces.length - 1].kind === 'break')
        push({ kind: 'lin', t0: start, t1: P[j - 1] });
      push({ kind: 'break', t0: P[j - 1], t1: P[j], w: chosen[j].w, text: chosen[j].text });
      start = P[j];
    }
    push({ kind: 'lin', t0: start, t1: end });
    return { pieces: pieces, S: (avail - W) / D, end: end, breaks: n };
  }

  function pieceAt(ax, t) {
    var a = 0, b = ax.pieces.length;
    while (b - a > 1) { var m = (a + b) >> 1; if (ax.pieces[m].t0 <= t) a = m; else b = m; }
    return ax.pieces[a];
  }
  function pieceX(ax, p, zoom) { return p.lin * ax.S * zoom + p.brk; }

  // True time (seconds) → px from the axis's origin, at `zoom`.
  function xof(ax, t, zoom) {
    if (t <= 0) return 0;
    if (t > ax.end) t = ax.end;
    var p = pieceAt(ax, t), x = pieceX(ax, p, zoom);
    if (p.kind === 'lin') return x + (t - p.t0) * ax.S * zoom;
    return x + p.w * (t - p.t0) / (p.t1 - p.t0);
  }
  // px from the origin → true time; `inBreak` tells whether x falls inside a squeezed gap.
  function tof(ax, x, zoom) {
    var a = 0, b = ax.pieces.length;
    while (b - a > 1) { var m = (a + b) >> 1; if (pieceX(ax, ax.pieces[m], zoom) <= x) a = m; else b = m; }
    var p = ax.pieces[a], dx = Math.max(0, x - pieceX(ax, p, zoom));
    if (p.kind === 'lin') return Math.min(p.t1, p.t0 + dx / (ax.S * zoom));
    return p.t0 + (p.t1 - p.t0) * Math.min(1, dx / p.w);
  }
  function inBreak(ax, x, zoom) {
    for (var i = 0; i < ax.pieces.length; i++) {
      var p = ax.pieces[i], x0 = pieceX(ax, p, zoom);
      if (p.kind === 'break' && x > x0 + 0.5 && x < x0 + p.w - 0.5) return true;
    }
    return false;
  }
  function width(ax, zoom) { return xof(ax, ax.end, zoom); }
  // The breaks as drawn at `zoom`: [{x0, x1, t0, t1, text}].
  function breaks(ax, zoom) {
    var out = [];
    ax.pieces.forEach(function (p) {
      if (p.kind !== 'break') return;
      var x0 = pieceX(ax, p, zoom);
      out.push({ x0: x0, x1: x0 + p.w, t0: p.t0, t1: p.t1, text: p.text });
    });
    return out;
  }

  var STEPS = [];
  (function () { for (var e = 3; e >= -9; e--) [5, 2, 1].forEach(function (m) { STEPS.push(m * Math.pow(10, e)); }); })();

  // The tick labels between px x0 and x1 (from the origin): every linear piece's first instant (and its last,
  // before a break or the end), written to the precision of one pixel, then round times a step apart. Labels
  // that would touch go to a second row or are left out (the round ones first); none runs more than `room` px
  // past the axis's end. Each: {t, x, text, anchor, row, box: [left, width]}.
  function ticks(ax, zoom, x0, x1, measure, room) {
    measure = measure || estimate;
    var S = ax.S * zoom, fine = Math.ceil(Math.log10(Math.max(1, S)) + 1e-9), out = [], rows = [[], []];
    var step = STEPS[0];
    for (var s = 0; s < STEPS.length; s++) if (STEPS[s] * S >= TICK_SPACING) step = STEPS[s];
    var stepDigits = Math.max(0, Math.ceil(-Math.log10(step) - 1e-9));
    function box(x, text, anchor) {
      var w = measure(text, 12) + 4;
      return [anchor === 'start' ? x - 2 : anchor === 'end' ? x - w + 2 : x - w / 2, w];
    }
    function free(row, b) {
      for (var i = 0; i < row.length; i++) if (b[0] < row[i][0] + row[i][1] + 8 && row[i][0] < b[0] + b[1] + 8) return false;
      return true;
    }
    var right = width(ax, zoom) + (room === undefined ? 30 : room);
    function add(t, text, anchor, forced) {
      var x = xof(ax, t, zoom);
      if (x < x0 || x > x1) return;
      var b = box(x, text, anchor);
      if (b[0] + b[1] > right) { anchor = 'end'; b = box(x, text, anchor); }
      for (var r = 0; r < (forced ? 2 : 1); r++)
        if (free(rows[r], b)) { rows[r].push(b); out.push({ t: t, x: x, text: text, anchor: anchor, row: r, box: b }); return; }
    }
    var lins = ax.pieces.filter(function (p) { return p.kind === 'lin'; });
    lins.forEach(function (p) {
      add(p.t0, secondsText(p.t0, fine), 'start', true);
    });
    lins.forEach(function (p) {
      if (p.t1 > p.t0) add(p.t1, secondsText(p.t1, fine), 'end', true);
    });
    lins.forEach(function (p) {
      var a = Math.max(p.t0, tof(ax, x0, zoom)), b = Math.min(p.t1, tof(ax, x1, zoom));
      for (var n = Math.ceil(a / step - 1e-9); n * step <= b + 1e-12; n++) {
        var t = n * step;
        if (t > p.t0 && t < p.t1) add(t, secondsText(t, stepDigits), 'middle', false);
      }
    });
    out.sort(function (a, b) { return a.x - b.x || a.row - b.row; });
    return out;
  }

  // Label placement: boxes [x, y, w, h] taken in order, each only where it touches none taken before.
  function Placer() { this.grid = {}; }
  Placer.prototype.cells = function (b, f) {
    for (var cx = Math.floor(b[0] / 64); cx <= Math.floor((b[0] + b[2]) / 64); cx++)
      for (var cy = Math.floor(b[1] / 16); cy <= Math.floor((b[1] + b[3]) / 16); cy++)
        if (f(cx + ',' + cy) === false) return false;
    return true;
  };
  Placer.prototype.fits = function (b) {
    var g = this.grid;
    return this.cells(b, function (key) {
      var c = g[key] || [];
      for (var k = 0; k < c.length; k++) {
        var r = c[k];
        if (b[0] < r[0] + r[2] && r[0] < b[0] + b[2] && b[1] < r[1] + r[3] && r[1] < b[1] + b[3]) return false;
      }
    });
  };
  Placer.prototype.take = function (b) {
    var g = this.grid;
    this.cells(b, function (key) { (g[key] = g[key] || []).push(b); });
  };
  // The index of the first candidate box that fits (and is taken), or -1.
  Placer.prototype.place = function (candidates) {
    for (var i = 0; i < candidates.length; i++)
      if (this.fits(candidates[i])) { this.take(candidates[i]); return i; }
    return -1;
  };

  // Repeated messages: msgs [{key, x0, x1}] in send order; a run of the same key whose sends follow each
  // other within `join` px and counts at least `minRun` becomes a band. Returns {singles: [index],
  // bands: [{key, id, members: [index], x0, x1}]}; a band's id is its key and first member.
  function groupMessages(msgs, join, minRun) {
    var runs = {}, order = [], singles = [], bands = [];
    function close(r) {
      if (r.members.length >= minRun) bands.push({ key: r.key, id: r.key + '@' + r.members[0], members: r.members, x0: r.x0, x1: r.x1 });
      else for (var i = 0; i < r.members.length; i++) singles.push(r.members[i]);
    }
    for (var i = 0; i < msgs.length; i++) {
      var m = msgs[i], r = runs[m.key];
      if (r && m.x0 - r.last <= join) {
        r.members.push(i); r.last = m.x0; r.x1 = Math.max(r.x1, m.x1); continue;
      }
      if (r) close(r); else order.push(m.key);
      runs[m.key] = { key: m.key, members: [i], x0: m.x0, x1: m.x1, last: m.x0 };
    }
    for (i = 0; i < order.length; i++) close(runs[order[i]]);
    singles.sort(function (a, b) { return a - b; });
    bands.sort(function (a, b) { return a.members[0] - b.members[0]; });
    return { singles: singles, bands: bands };
  }

  // Rows for bands on a lane: each band takes the first of its `offsets` (px from the lane's line to its top)
  // where it touches no band taken before on that lane, so two bands never cover each other (a click always
  // reaches the one it is aimed at). Returns the offset taken, or the first when all are taken.
  function BandRows() { this.taken = {}; }
  BandRows.prototype.place = function (lane, x0, x1, offsets, h) {
    var t = this.taken[lane] = this.taken[lane] || [];
    for (var i = 0; i < offsets.length; i++) {
      var y0 = offsets[i], ok = true;
      for (var k = 0; k < t.length && ok; k++)
        if (x0 - 2 < t[k][1] && t[k][0] < x1 + 2 && y0 < t[k][3] && t[k][2] < y0 + h) ok = false;
      if (ok) { t.push([x0, x1, y0, y0 + h]); return y0; }
    }
    return offsets[0];
  };

  return { buildAxis: buildAxis, BandRows: BandRows, xof: xof, tof: tof, inBreak: inBreak, width: width, breaks: breaks, ticks: ticks,
           durationText: durationText, secondsText: secondsText, estimate: estimate, Placer: Placer,
           groupMessages: groupMessages };
})();
if (typeof module !== 'undefined' && module.exports) module.exports = LocksimLayout;
