// The HTML report's page script: reads the run's model (the JSON in the script element #model), lays it out on the
// time axis with LocksimLayout (layout.js), draws the space-time diagram into the static skeleton, and handles
// zoom, scroll, tooltips and the message bands. After every render it writes what it drew (ticks, squeezed
// gaps, story events, label boxes, the banner) into the script element #layout for the tests that read the page as a
// person sees it.
(function () {
'use strict';
if (typeof document === 'undefined') return;
var Lay = LocksimLayout;
var body = document.body;
function fail() { body.setAttribute('data-js-errors', String(Number(body.getAttribute('data-js-errors') || 0) + 1)); }
window.addEventListener('error', fail);
var cerr = console.error;
console.error = function () { fail(); return cerr.apply(console, arguments); };
var M = JSON.parse(document.getElementById('model').textContent);
var NS = 'http://www.w3.org/2000/svg';
var svg = document.getElementById('diagram'), labels = document.getElementById('lane-labels');
var scroller = document.getElementById('scroller');
var L = M.lanes, E = M.ev, END = M.end / 1e9;
var TOP = 64, AXIS = 58, PAD = 18, RIGHT = 40;
var H = { client: 112, server: 62, store: 70, other: 56 };
var laneY = [], y = TOP + 6, i;
for (i = 0; i < L.length; i++) {
  var h = H[L[i].kind] || 56;
  laneY.push(y + (L[i].kind === 'client' ? h * 0.48 : h / 2));
  L[i].top = y; L[i].h = h; y += h;
}
var BOT = y + 4, HEIGHT = BOT + AXIS;
function T(r) { return Math.min(E[r][0] / 1e9, END); }
function el(tag, attrs, parent, text) {
  var e = document.createElementNS(NS, tag);
  for (var k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

// ---- text measure (the labels' real widths, so placed labels never overlap) ----
var ctx = document.createElement('canvas').getContext('2d');
var FAMILY = getComputedStyle(body).fontFamily;
var FONT = { 'msg-label': [9.5, 400], 'bar-label': [12, 400], 'pause-label': [11.5, 700], wlabel: [12, 600],
  'note-label': [11.5, 400], 'clock-label': [11, 600], 'gap-label': [11, 400], 'band-label': [11, 600],
  'violation-text': [12, 700], tick: [12, 400] };
var measured = {}, measuredFont = '';  // a run repeats the same few labels thousands of times
function measure(text, size, weight) {
  var font = (weight || 400) + ' ' + size + 'px ' + FAMILY, key = font + '|' + text;
  if (key in measured) return measured[key];
  if (font !== measuredFont) { ctx.font = font; measuredFont = font; }
  return (measured[key] = ctx.measureText(text).width);
}
function measureCls(text, cls) { var f = FONT[cls.split(' ')[0]] || [12, 400]; return measure(text, f[0], f[1]); }

// ---- the time axis: every instant drawn is an instant of the axis, so none falls in a squeezed gap ----
var inst = [];
function a(r) { if (r !== undefined) inst.push(T(r)); }
var k, g;
for (k = 0; k < M.pauses.length; k++) { a(M.pauses[k][1]); a(M.pauses[k][2]); }
for (k = 0; k < M.downs.length; k++) { a(M.downs[k][1]); a(M.downs[k][2]); }
for (k = 0; k < M.grants.length; k++) { g = M.grants[k]; a(g.b0); a(g.b1); a(g.s0); a(g.s1); a(g.stale); }
for (k = 0; k < M.writes.length; k++) { a(M.writes[k].e0); a(M.writes[k].e1); }
for (k = 0; k < M.svc.length; k++) a(M.svc[k]);
for (k = 0; k < M.marks.length; k++) a(M.marks[k][1]);
for (k = 0; k < M.msgs.length; k++) { a(M.msgs[k][0]); a(M.msgs[k][1]); }
// The axes are built for the scroller's width: at "fit" the whole run fills it, and nothing is drawn past its
// right edge. When the width changes (the window is resized, or drawing the diagram made the page tall
// enough for a vertical scrollbar), they are built again.
function axisMeasure(text, size) { return measure(text, size, 400); }
var AX = null, builtFor = -1;
function buildAxes() {
  builtFor = scroller.clientWidth;
  var avail = Math.max(400, builtFor - PAD - RIGHT);
  AX = { squeezed: Lay.buildAxis(inst, END, avail, true, axisMeasure), linear: Lay.buildAxis(inst, END, avail, false) };
}
buildAxes();
var state = { zoom: 1, compressed: M.compress, open: {} };
function ax() { return state.compressed ? AX.squeezed : AX.linear; }
function xof(t) { return PAD + Lay.xof(ax(), t, state.zoom); }
function width() { return xof(END) + RIGHT; }

// ---- labels that never overlap: earlier ones win, later ones try their other places or give way ----
var placer, Wcur = 0;
function label(parent, x, yy, text, cls, anchor, alts) {
  var w = measureCls(text, cls) + 4, hh = (FONT[cls.split(' ')[0]] || [12])[0] + 3;
  var offs = [0].concat(alts || []);
  for (var n = 0; n < offs.length; n++) {
    var xa = x, an = anchor || 'start', y1 = yy + offs[n];
    var x0 = an === 'middle' ? xa - w / 2 : an === 'end' ? xa - w : xa;
    if (x0 + w > Wcur - 2) { x0 = Wcur - 2 - w; xa = x0; an = 'start'; }
    if (x0 < 2) { x0 = 2; xa = 2; an = 'start'; }
    if (y1 - hh + 3 < 0 || y1 + 3 > HEIGHT) continue;  // never cut by the diagram's top or bottom edge
    if (placer.place([[x0, y1 - hh + 3, w, hh]]) < 0) continue;
    return el('text', { x: xa, y: y1, 'class': cls, 'text-anchor': an }, parent, text);
  }
  return null;
}
var MORE = [-13, 13, -26, 26];

// ---- tooltips: true time and the node's own clocks ----
function secs(ns) { return (ns / 1e9).toFixed(6) + ' s'; }
function describe(r) {
  var e = E[r], name = e[3] >= 0 ? L[e[3]].name : 'world', ap = e[7] ? '\u2248 ' : '';
  var s = name + ' \u00b7 ' + e[4] + (e[5] ? ' ' + e[5] : '') + (e[6] ? '\n  ' + e[6] : '');
  s += '\n  true time ' + secs(e[0]);
  if (e[3] >= 0) s += '\n  ' + name + ' clocks: monotonic ' + ap + secs(e[1]) + ' \u00b7 wall ' + ap + secs(e[2]);
  return s;
}
var tip = document.getElementById('tip');
function showTip(ev) {
  var t = ev.target.closest ? ev.target.closest('[data-ev],[data-head]') : null;
  if (!t) { tip.style.display = 'none'; return; }
  var rows = (t.getAttribute('data-ev') || '').split(' ').filter(Boolean).map(Number), head = t.getAttribute('data-head');
  tip.textContent = (head ? head + '\n' : '') + rows.map(describe).join('\n');
  tip.style.display = 'block';
  var x = ev.clientX + 14, yy = ev.clientY + 14, r = tip.getBoundingClientRect();
  if (x + r.width > window.innerWidth - 4) x = ev.clientX - r.width - 14;
  if (yy + r.height > window.innerHeight - 4) yy = ev.clientY - r.height - 14;
  tip.style.left = x + 'px'; tip.style.top = yy + 'px';
}
svg.addEventListener('mousemove', showTip);
svg.addEventListener('mouseleave', function () { tip.style.display = 'none'; });

// ---- static parts: lane labels ----
el('rect', { x: 0, y: 0, width: 150, height: HEIGHT, fill: '#fff' }, labels);
for (i = 0; i < L.length; i++) {
  var kind = L[i].label || { client: 'client', server: 'lock server', store: 'resource (store)', other: 'process' }[L[i].kind];
  el('rect', { x: 0, y: L[i].top, width: 150, height: L[i].h, 'class': 'band-' + (i % 2) }, labels);
  el('text', { x: 12, y: laneY[i] - 2, 'class': 'lane-name' }, labels, L[i].name);
  el('text', { x: 12, y: laneY[i] + 13, 'class': 'lane-kind' }, labels, kind);
}
labels.setAttribute('height', HEIGHT); labels.setAttribute('viewBox', '0 0 150 ' + HEIGHT);
var laneG = svg.querySelectorAll('g.lane'), violG = svg.querySelectorAll('g.violation'), layers = {};
['axis', 'bars', 'arrows', 'marks', 'writes', 'labels', 'bands'].forEach(function (n) { layers[n] = document.getElementById('layer-' + n); });
function clear(gr) { var c = gr.firstChild; while (c) { var n = c.nextSibling; if (c.nodeName !== 'title') gr.removeChild(c); c = n; } }
function hit(parent, d, rows, head) {
  var p = el('path', { d: d, 'class': 'hit', 'data-ev': rows.join(' ') }, parent);
  if (head) p.setAttribute('data-head', head);
  return p;
}
function seg(x1, y1, x2, y2) { return 'M' + x1 + ',' + y1 + 'L' + x2 + ',' + y2; }

// ---- the axis: ticks at true times in their true places, squeezed gaps drawn with their length ----
function drawAxis(W) {
  var gr = layers.axis, A = ax(), z = state.zoom;
  clear(gr);
  el('line', { x1: PAD, x2: W - RIGHT + 10, y1: TOP - 4, y2: TOP - 4 }, gr);
  el('line', { x1: PAD, x2: W - RIGHT + 10, y1: BOT, y2: BOT }, gr);
  var br = Lay.breaks(A, z);
  for (var n = 0; n < br.length; n++) {
    var b = br[n], x0 = PAD + b.x0, x1 = PAD + b.x1;
    if (!vis(x0, x1)) continue;
    el('rect', { x: x0, y: TOP - 4, width: x1 - x0, height: BOT - TOP + 4, 'class': 'gap', 'data-label': b.text + ' squeezed',
      'data-head': 'IDLE ' + (b.t1 - b.t0).toFixed(6) + ' s squeezed (from ' + b.t0.toFixed(6) + ' s to ' + b.t1.toFixed(6) + ' s)' }, gr);
    el('path', { d: 'M' + x0 + ',' + (TOP - 4) + 'V' + BOT + 'M' + x1 + ',' + (TOP - 4) + 'V' + BOT, 'class': 'gap-edge' }, gr);
    var cx = (x0 + x1) / 2;
    el('text', { x: cx, y: BOT + 33, 'text-anchor': 'middle', 'class': 'gap-label' }, gr, b.text);
    el('text', { x: cx, y: BOT + 49, 'text-anchor': 'middle', 'class': 'gap-label' }, gr, 'squeezed');
    placer.take([x0, BOT + 21, x1 - x0, 32]);
  }
  var tk = Lay.ticks(A, z, VX0 - PAD, VX1 - PAD, function (t, s) { return measure(t, s, 400); }, RIGHT - 4);
  for (n = 0; n < tk.length; n++) {
    var t = tk[n], x = PAD + t.x, row = t.row * 14;
    el('line', { x1: x, x2: x, y1: TOP - 6, y2: BOT + 6, 'class': 'gridline' }, gr);
    el('line', { x1: x, x2: x, y1: TOP - 8 - row, y2: TOP - 4, 'class': 'tick-mark' }, gr);
    el('text', { x: x, y: TOP - 10 - row, 'text-anchor': t.anchor, 'class': 'tick', 'data-x': x }, gr, t.text);
    placer.take([PAD + t.box[0], TOP - 22 - row, t.box[1], 14]);
    if (t.row > 0) continue;  // the second row is only drawn above (below, the squeezed gaps' labels sit)
    el('text', { x: x, y: BOT + 15, 'text-anchor': t.anchor, 'class': 'tick-b' }, gr, t.text);
    placer.take([PAD + t.box[0], BOT + 3, t.box[1], 14]);
  }
}

// Only what lies within a screen of the viewport is drawn (big runs stay fast when zoomed in); scrolling
// further redraws.
var VX0 = 0, VX1 = 0, pending = false;
function vis(x0, x1) { return Math.max(x0, x1) >= VX0 && Math.min(x0, x1) <= VX1; }
var writeById = {}, inViolation = {};
for (k = 0; k < M.writes.length; k++) writeById[M.writes[k].id] = M.writes[k];
M.violations.forEach(function (v) { inViolation[v.earlier] = inViolation[v.later] = true; });

// ---- messages: one arrow each, or a band with a count where one process repeats itself ----
var MSGKEY = M.msgs.map(function (m) { return m[2] + '|' + E[m[0]][5]; });
function drawMessages(A2, Lb) {
  var list = [], idx = [];
  for (var n = 0; n < M.msgs.length; n++) {
    var m = M.msgs[n], x0 = xof(T(m[0])), x1 = xof(T(m[1]));
    if (!vis(x0, x1)) continue;
    list.push({ key: MSGKEY[n], x0: x0, x1: x1 }); idx.push(n);
  }
  var grp = Lay.groupMessages(list, 24, 6), show = grp.singles.slice(), memberOf = {};
  grp.bands.forEach(function (b) {
    var first = M.msgs[idx[b.members[0]]], lane = first[2], yy = laneY[lane], id = b.id.split('@')[0] + '@' + idx[b.members[0]];
    var open = !!state.open[id], to = {};
    b.members.forEach(function (j) { to[L[M.msgs[idx[j]][3]].name] = true; });
    var names = Object.keys(to).sort(), dest = names.length <= 2 ? names.join(', ') : names.length + ' processes';
    var what = b.members.length + '\u00d7 ' + E[first[0]][5] + ' \u2192 ' + dest;
    var top = band(lane, b.x0, b.x1, [-4, -14, 6, -24, 16], 'band', id, b.members.length, what + ' (' + (T(first[0])).toFixed(3) + ' s \u2026 ' +
      T(M.msgs[idx[b.members[b.members.length - 1]]][0]).toFixed(3) + ' s) \u00b7 click to ' + (open ? 'fold' : 'show each message') +
      '\n  to ' + names.join(', '));
    label(Lb, b.x0 + 2, top - 3, what, 'band-label', 'start', [BAND_H + 14, -10]);
    if (open) b.members.forEach(function (j) { show.push(j); memberOf[j] = id; });
  });
  show.sort(function (p, q) { return p - q; });
  for (var s = 0; s < show.length; s++) {
    var arrow = drawArrow(M.msgs[idx[show[s]]], list[show[s]], A2, Lb);
    if (memberOf[show[s]] !== undefined) arrow.setAttribute('data-member-of', memberOf[show[s]]);
  }
}
// A band: the rect that stands for a run of repeated marks, in the top layer (a click anywhere on it opens or
// folds it, whatever lies under it); open, it is an outline around its members.
// `lane` and `offsets` (px from the lane's line to the band's top, in order of preference) give its row: the
// first where it covers no other band of that lane. Returns the y of its top.
var BAND_H = 8, bandRows;
function band(lane, x0, x1, offsets, cls, id, count, head) {
  var open = !!state.open[id], w = Math.max(4, x1 - x0), y0 = laneY[lane] + bandRows.place(lane, x0, x0 + w, offsets, BAND_H);
  el('rect', { x: x0, y: y0, width: w, height: BAND_H, rx: BAND_H / 2, 'class': cls + (open ? ' open' : ''),
    'data-band': id, 'data-count': String(count), 'data-head': head }, layers.bands);
  return y0;
}
// The arrow of message `m` at `pos`; returns its line.
function drawArrow(m, pos, A2, Lb) {
  var xa = pos.x0, ya = laneY[m[2]], xb = pos.x1, yb = laneY[m[3]];
  var head = E[m[0]][5] + ' ' + L[m[2]].name + ' \u2192 ' + L[m[3]].name + (m[4] === 1 ? ' (DROPPED)' : m[4] === 2 ? ' (in flight at the end)' : '');
  var line;
  if (m[4] === 0) line = el('path', { d: seg(xa, ya, xb, yb), 'class': 'msg', 'marker-end': 'url(#arrow)' }, A2);
  else {
    var xe = xa + (xb - xa) * 0.35, ye = ya + (yb - ya) * 0.35;
    if (m[4] === 1) xe = Math.max(xa + 4, xb);
    line = el('path', { d: seg(xa, ya, xe, ye), 'class': 'msg ' + (m[4] === 1 ? 'dropped' : 'inflight') }, A2);
    if (m[4] === 1) el('path', { d: 'M' + (xe - 5) + ',' + (ye - 5) + 'L' + (xe + 5) + ',' + (ye + 5) + 'M' + (xe - 5) + ',' + (ye + 5) + 'L' + (xe + 5) + ',' + (ye - 5), 'class': 'xmark' }, A2);
    xb = xe; yb = ye;
  }
  hit(A2, seg(xa, ya, xb, yb), [m[0], m[1]], head);
  if (Math.abs(xb - xa) > 40) label(Lb, xa + (xb - xa) * 0.5 + 3, ya + (yb - ya) * 0.5, E[m[0]][5], 'msg-label', 'start');
  return line;
}

// Draws at the scroller's width; when drawing changed that width (a vertical scrollbar came or went), the
// axes are built again for the new width and drawn once more, the same moment at the left edge.
function render(scrollTo) {
  var started = performance.now();
  draw(scrollTo);
  if (scroller.clientWidth !== builtFor) {
    var t = Lay.tof(ax(), Math.max(0, scroller.scrollLeft - PAD), state.zoom), left = scroller.scrollLeft;
    buildAxes();
    draw(left > 0 ? Math.max(0, xof(t)) : 0);
  }
  dumpLayout();
  body.setAttribute('data-rendered', '1');
  body.setAttribute('data-render-ms', String(Math.round(performance.now() - started)));
}
window.addEventListener('resize', function () {
  if (pending || scroller.clientWidth === builtFor) return;
  pending = true;
  requestAnimationFrame(function () { pending = false; builtFor = -1; render(); });
});

function draw(scrollTo) {
  var sl = scrollTo === undefined ? scroller.scrollLeft : scrollTo, cw = scroller.clientWidth;
  VX0 = sl - cw; VX1 = sl + 2 * cw;
  var W = width(); Wcur = W;
  svg.setAttribute('width', W); svg.setAttribute('height', HEIGHT);
  placer = new Lay.Placer(); bandRows = new Lay.BandRows();
  for (var n in layers) clear(layers[n]);
  for (var q = 0; q < laneG.length; q++) {
    var lg = laneG[q], li = Number(lg.getAttribute('data-index'));
    clear(lg);
    el('rect', { x: 0, y: L[li].top - laneY[li], width: W, height: L[li].h, 'class': 'band-' + (li % 2) }, lg);
    el('line', { x1: PAD, x2: W - RIGHT + 10, y1: 0, y2: 0, 'class': 'baseline' }, lg);
  }
  drawAxis(W);
  var B = layers.bars, Mk = layers.marks, Wr = layers.writes, Lb = layers.labels, x0, x1, yy;
  // violations first: their marks and labels win every collision
  for (k = 0; k < violG.length; k++) {
    var vg = violG[k], vi = Number(vg.getAttribute('data-index')), v = M.violations[vi];
    clear(vg);
    var wa = v.earlier === null ? null : writeById[v.earlier], wb = v.later === null ? null : writeById[v.later];
    if (!wa || !wb) continue;
    var xa = xof(T(wa.e1)), xb = xof(T(wb.e1)), ys = laneY[wb.to];
    if (!vis(xa, xb)) continue;
    el('line', { x1: xb, x2: xb, y1: 22, y2: BOT, 'class': 'violation-line' }, vg);
    el('circle', { cx: xa, cy: ys, r: 14, 'class': 'violation-ring' }, vg);
    el('circle', { cx: xb, cy: ys, r: 14, 'class': 'violation-ring' }, vg);
    placer.take([xa - 16, ys - 16, 32, 32]); placer.take([xb - 16, ys - 16, 32, 32]);
    label(vg, xb + 3, 18, '\u26a0 ' + (vi + 1), 'violation-text', 'start', [-12 + 30, 0]) ||
      label(vg, xb - 3, 18, '\u26a0 ' + (vi + 1), 'violation-text', 'end');
    label(Lb, xa, ys + 30, v.label_earlier, 'wlabel ok', 'middle', MORE);
    label(Lb, xb, ys - 22, v.label_later, 'wlabel bad', 'middle', MORE);
  }
  // pauses
  for (k = 0; k < M.pauses.length; k++) {
    var p = M.pauses[k];
    x0 = xof(T(p[1])); x1 = xof(T(p[2])); yy = laneY[p[0]];
    if (!vis(x0, x1)) continue;
    el('rect', { x: x0, y: yy - 8, width: Math.max(0, x1 - x0), height: 16, rx: 2, 'class': 'pause', 'data-pause': k }, B);
    var d = (T(p[2]) - T(p[1])).toFixed(3);
    hit(B, 'M' + x0 + ',' + yy + 'H' + x1, [p[1], p[2]], 'PAUSED for ' + d + ' s (messages and timers queue up)');
    var pl = 'paused ' + d + ' s';
    if (x1 - x0 > measureCls(pl, 'pause-label') + 8) label(Lb, (x0 + x1) / 2, yy + 4, pl, 'pause-label', 'middle');
    else label(Lb, x0, yy + 20, pl, 'pause-label', 'start', [-28]);
  }
  for (k = 0; k < M.downs.length; k++) {
    var dn = M.downs[k];
    x0 = xof(T(dn[1])); x1 = xof(T(dn[2])); yy = laneY[dn[0]];
    if (!vis(x0, x1)) continue;
    el('line', { x1: x0, x2: x1, y1: yy, y2: yy, 'class': 'down' }, B);
    hit(B, 'M' + x0 + ',' + yy + 'H' + x1, [dn[1], dn[2]], 'DOWN (crashed)');
  }
  // leases: belief above the lane, the service's view below it
  for (k = 0; k < M.grants.length; k++) {
    var gr = M.grants[k];
    yy = laneY[gr.lane]; x0 = xof(T(gr.b0)); x1 = xof(T(gr.b1));
    var lo = Math.min(x0, gr.s0 === undefined ? x0 : xof(T(gr.s0)));
    var hi = Math.max(x1, gr.s1 === undefined ? x1 : xof(T(gr.s1)), gr.stale === undefined ? x1 : xof(T(gr.stale)));
    if (!vis(lo, hi)) continue;
    var tok = gr.token === null ? 'no token' : 'token ' + gr.token;
    el('rect', { x: x0, y: yy - 30, width: Math.max(0, x1 - x0), height: 10, rx: 3, 'class': gr.open ? 'belief-open' : 'belief', 'data-grant': k }, B);
    hit(B, 'M' + x0 + ',' + (yy - 25) + 'H' + x1, [gr.b0, gr.b1], 'LEASE as ' + L[gr.lane].name + ' believes \u00b7 ' + tok + ' \u00b7 epoch ' + gr.epoch);
    label(Lb, x0, yy - 35, 'holds the lock (as it believes) \u00b7 ' + tok + ' \u00b7 epoch ' + gr.epoch, 'bar-label', 'start') ||
      label(Lb, x0, yy - 35, tok + ' \u00b7 epoch ' + gr.epoch, 'bar-label', 'start');
    if (gr.stale !== undefined) {
      var xs2 = xof(T(gr.stale));
      el('line', { x1: x1, x2: xs2, y1: yy - 25, y2: yy - 25, 'class': 'stale' }, B);
      hit(B, 'M' + x1 + ',' + (yy - 25) + 'H' + xs2, [gr.b1, gr.stale], 'ACTING ON A STALE LEASE');
      label(Lb, xs2 - 4, yy - 35, 'lease ran out, still acting', 'bar-label', 'end', [-13]);
    }
    if (gr.s0 !== undefined) {
      var s0 = xof(T(gr.s0)), s1 = xof(T(gr.s1));
      el('rect', { x: s0, y: yy + 18, width: Math.max(0, s1 - s0), height: 7, rx: 2, 'class': 'service' }, B);
      hit(B, 'M' + s0 + ',' + (yy + 21) + 'H' + s1, [gr.s0, gr.s1], 'SERVICE VIEW: ' + L[gr.lane].name + ' is the holder (epoch ' + gr.epoch + ')');
      label(Lb, s0, yy + 38, 'service: holder (epoch ' + gr.epoch + ')', 'bar-label', 'start');
    }
  }
  drawMessages(layers.arrows, Lb);
  // writes: client → store, judged there; a run of one client's writes of one verdict is a band (never a
  // write of a violation)
  var wl = [], wi = [];
  for (k = 0; k < M.writes.length; k++) {
    var wk = M.writes[k], wx0 = xof(T(wk.e0)), wx1 = xof(T(wk.e1));
    if (!vis(wx0, wx1)) continue;
    wl.push({ key: inViolation[wk.id] ? 'v' + k : 'w|' + wk.from + '|' + (!wk.arrived ? 'lost' : wk.accepted ? 'ok' : 'bad'), x0: wx0, x1: wx1 });
    wi.push(k);
  }
  var wg = Lay.groupMessages(wl, 24, 6), wshow = wg.singles.map(function (j) { return wi[j]; });
  var wmember = {};
  wg.bands.forEach(function (b) {
    var w0 = M.writes[wi[b.members[0]]], id = b.key + '@' + wi[b.members[0]], open = !!state.open[id], yb = laneY[w0.from];
    var v = !w0.arrived ? 'never arrived' : w0.accepted ? 'accepted \u2713' : 'rejected \u2717';
    var what = b.members.length + ' writes ' + v;
    var top = band(w0.from, b.x0, b.x1, [6, 16, -14, -24], 'band wband ' + (w0.accepted ? 'ok' : 'bad'), id, b.members.length,
      what + ' by ' + L[w0.from].name + ' \u00b7 click to ' + (open ? 'fold' : 'show each write'));
    label(Lb, b.x0 + 2, top + BAND_H + 11, what, 'band-label', 'start', [13, -BAND_H - 14]);
    if (open) b.members.forEach(function (j) { wshow.push(wi[j]); wmember[wi[j]] = id; });
  });
  wshow.sort(function (p2, q2) { return p2 - q2; });
  for (var ws = 0; ws < wshow.length; ws++) {
    var w = M.writes[wshow[ws]];
    x0 = xof(T(w.e0)); x1 = xof(T(w.e1));
    var y0 = laneY[w.from], y1 = laneY[w.to], cls = !w.arrived ? 'lost' : w.accepted ? 'ok' : 'bad';
    var wpath = el('path', { d: seg(x0, y0, x1, y1), 'class': 'write ' + cls, 'data-sent': x0 }, Wr);
    if (wmember[wshow[ws]] !== undefined) wpath.setAttribute('data-member-of', wmember[wshow[ws]]);
    var wt = (w.token === null ? '' : 't' + w.token + ' ') + (w.accepted ? '\u2713' : '\u2717');
    hit(Wr, seg(x0, y0, x1, y1), [w.e0, w.e1], 'WRITE #' + w.id + ' by ' + L[w.from].name + (w.accepted ? ' \u2014 ACCEPTED' : ' \u2014 rejected'));
    if (w.arrived) {
      var c = el('circle', { cx: x1, cy: y1, r: 7, 'class': 'wdot ' + (w.accepted ? 'ok' : 'bad'), 'data-ev': w.e1 + ' ' + w.e0,
        'data-head': 'WRITE #' + w.id + (w.accepted ? ' ACCEPTED' : ' rejected') }, Wr);
      c.setAttribute('data-write', String(w.id));
      var wc = 'wlabel ' + (w.accepted ? 'ok' : 'bad');
      label(Lb, x1, y1 + 24, 'epoch ' + w.epoch + ' ' + wt, wc, 'middle') || label(Lb, x1, y1 + 24, wt, wc, 'middle');
    }
  }
  drawMarks(Mk, Lb);
  document.getElementById('zoom-level').textContent = Math.round(state.zoom * 100) + '%';
  if (scrollTo !== undefined) scroller.scrollLeft = scrollTo;
}

// clocks, crashes, restarts, notes, service sets, network events
function drawMarks(Mk, Lb) {
  var lastNote = {};  // lane|label -> x of its last label: a retry loop's notes get one label, not one each
  for (var n = 0; n < M.marks.length; n++) {
    var mk = M.marks[n], r = mk[1], x0 = xof(T(r)), yy;
    if (!vis(x0 - 300, x0 + 300)) continue;
    if (mk[0] < 0 || mk[2] === 'global') {
      el('line', { x1: x0, x2: x0, y1: TOP, y2: BOT, 'class': 'global-line' }, Mk);
      hit(Mk, 'M' + x0 + ',' + TOP + 'V' + BOT, [r]);
      label(Lb, x0 + 4, BOT - 6, E[r][4] + ' ' + E[r][5], 'note-label', 'start', [-13]);
      continue;
    }
    yy = laneY[mk[0]];
    var txt = E[r][5] + (E[r][6] ? ' ' + E[r][6] : '');
    if (mk[2] === 'crash') {
      el('path', { d: 'M' + (x0 - 7) + ',' + (yy - 7) + 'L' + (x0 + 7) + ',' + (yy + 7) + 'M' + (x0 - 7) + ',' + (yy + 7) + 'L' + (x0 + 7) + ',' + (yy - 7), 'class': 'crash-mark' }, Mk);
      label(Lb, x0, yy - 12, 'CRASH', 'clock-label', 'middle', MORE);
    } else if (mk[2] === 'restart') {
      el('path', { d: 'M' + x0 + ',' + (yy - 7) + 'L' + (x0 + 11) + ',' + yy + 'L' + x0 + ',' + (yy + 7) + 'Z', 'class': 'restart-mark' }, Mk);
      label(Lb, x0 + 4, yy - 10, 'restart', 'note-label', 'start', [-13]);
    } else if (mk[2] === 'clock') {
      el('circle', { cx: x0, cy: yy, r: 7, 'class': 'clock-mark' }, Mk);
      el('path', { d: 'M' + x0 + ',' + (yy - 4) + 'V' + yy + 'H' + (x0 + 3), stroke: '#0e7490', 'stroke-width': 1.5, fill: 'none' }, Mk);
      label(Lb, x0 + 10, yy - 10, 'clock ' + txt, 'clock-label', 'start', [-13]);
    } else if (mk[2] === 'fault') {
      el('rect', { x: x0 - 5, y: yy - 5, width: 10, height: 10, fill: '#0f766e' }, Mk);
      label(Lb, x0 + 8, yy - 8, txt, 'note-label', 'start');
    } else {
      el('line', { x1: x0, x2: x0, y1: yy - 6, y2: yy + 6, 'class': 'note-tick' }, Mk);
      var nk = mk[0] + '|' + E[r][5];
      if ((!(nk in lastNote) || x0 - lastNote[nk] > 260) && label(Lb, x0 + 3, yy + 14, E[r][5], 'note-label', 'start')) lastNote[nk] = x0;
    }
    hit(Mk, 'M' + x0 + ',' + (yy - 8) + 'V' + (yy + 8), [r]);
  }
  // service grants: a diamond each, or a band with a count where one lock server grants again and again
  var sl = [], si = [];
  for (n = 0; n < M.svc.length; n++) {
    var xs = xof(T(M.svc[n]));
    if (!vis(xs - 200, xs + 200)) continue;
    sl.push({ key: 's|' + E[M.svc[n]][3] + '|' + E[M.svc[n]][6].split('=')[0], x0: xs, x1: xs }); si.push(n);
  }
  // (joined across more room than messages: a diamond's label is wider than the gap between two arrows)
  var sg = Lay.groupMessages(sl, 64, 6), sshow = sg.singles.slice(), smember = {};
  sg.bands.forEach(function (b) {
    var first = M.svc[si[b.members[0]]], id = b.key + '@' + si[b.members[0]];
    var what = b.members.length + '\u00d7 grant ' + E[first][6].split('=')[0];
    var last = M.svc[si[b.members[b.members.length - 1]]];
    var top = band(E[first][3], b.x0 - 6, b.x1 + 6, [6, 16, -14, -24], 'band sband', id, b.members.length, what + ' (' + T(first).toFixed(3) + ' s \u2026 ' +
      T(last).toFixed(3) + ' s, ground truth) \u00b7 click to ' + (state.open[id] ? 'fold' : 'show each grant'));
    label(Lb, b.x0 - 4, top + BAND_H + 11, what, 'band-label', 'start', [13, -BAND_H - 14]);
    if (state.open[id]) b.members.forEach(function (j) { sshow.push(j); smember[j] = id; });
  });
  sshow.sort(function (p, q) { return p - q; });
  for (n = 0; n < sshow.length; n++) {
    var sr = M.svc[si[sshow[n]]], xd = sl[sshow[n]].x0, yd = laneY[E[sr][3]];
    var dia = el('path', { d: 'M' + xd + ',' + (yd - 6) + 'L' + (xd + 6) + ',' + yd + 'L' + xd + ',' + (yd + 6) + 'L' + (xd - 6) + ',' + yd + 'Z', 'class': 'svc-dot' }, Mk);
    if (smember[sshow[n]] !== undefined) dia.setAttribute('data-member-of', smember[sshow[n]]);
    hit(Mk, 'M' + xd + ',' + (yd - 8) + 'V' + (yd + 8), [sr], 'SERVICE SET (ground truth)');
    label(Lb, xd + 8, yd - 8, 'grant ' + E[sr][6].split('=')[0], 'note-label', 'start', [22]);
  }
}

// What was drawn, for the tests: tick labels, squeezed gaps, story events, every text box, the banner.
function dumpLayout() {
  var sr = scroller.getBoundingClientRect();
  var out = { viewport: [innerWidth, innerHeight], page_width: document.documentElement.clientWidth, zoom: state.zoom, compressed: state.compressed,
    view: [scroller.scrollLeft, scroller.scrollLeft + scroller.clientWidth], diagram: [Number(svg.getAttribute('width')), HEIGHT],
    scroller: { left: sr.left, right: sr.left + scroller.clientWidth, scroll_width: scroller.scrollWidth, client_width: scroller.clientWidth },
    ticks: [], breaks: [], events: [], texts: [], lane_texts: [], bands: [], banner: null };
  function q(sel) { return Array.prototype.slice.call(svg.querySelectorAll(sel)); }
  q('text.tick').forEach(function (e) { out.ticks.push({ x: Number(e.getAttribute('data-x')), text: e.textContent }); });
  q('rect.gap').forEach(function (e) {
    var x = Number(e.getAttribute('x'));
    out.breaks.push({ x0: x, x1: x + Number(e.getAttribute('width')), label: e.getAttribute('data-label') || '' });
  });
  function ev(what, t, x) { if (x >= VX0 && x <= VX1) out.events.push({ what: what, t: t, x: x }); }
  q('circle[data-write]').forEach(function (e) {
    var w = writeById[e.getAttribute('data-write')];
    ev('write #' + w.id + ' reaches the store', T(w.e1), Number(e.getAttribute('cx')));
  });
  q('rect[data-pause]').forEach(function (e) {
    var p = M.pauses[Number(e.getAttribute('data-pause'))], x = Number(e.getAttribute('x'));
    ev(L[p[0]].name + ' pauses', T(p[1]), x);
    ev(L[p[0]].name + ' resumes', T(p[2]), x + Number(e.getAttribute('width')));
  });
  q('rect[data-grant]').forEach(function (e) {
    var gr = M.grants[Number(e.getAttribute('data-grant'))];
    ev(L[gr.lane].name + ' acquires (epoch ' + gr.epoch + ')', T(gr.b0), Number(e.getAttribute('x')));
  });
  q('text').forEach(function (e) {
    var b = e.getBBox();
    if (b.width > 0 && b.height > 0) out.texts.push({ text: e.textContent, box: [b.x, b.y, b.width, b.height] });
  });
  Array.prototype.slice.call(labels.querySelectorAll('text')).forEach(function (e) {
    var b = e.getBBox();
    out.lane_texts.push({ text: e.textContent, box: [b.x, b.y, b.width, b.height] });
  });
  out.lane_column = Number(labels.getAttribute('width'));
  q('rect[data-band]').forEach(function (e) {
    var b = e.getBoundingClientRect();
    out.bands.push({ id: e.getAttribute('data-band'), count: Number(e.getAttribute('data-count')), open: e.classList.contains('open'),
      center: [(b.left + b.right) / 2, (b.top + b.bottom) / 2], visible: b.left >= sr.left && b.right <= sr.left + scroller.clientWidth });
  });
  var ban = document.getElementById('violations');
  if (ban) {
    var r = ban.getBoundingClientRect();
    out.banner = { left: r.left, right: r.right, top: r.top, bottom: r.bottom, text: ban.textContent,
      items: Array.prototype.slice.call(ban.querySelectorAll('li')).map(function (li) { return li.textContent; }),
      overflow: ban.scrollWidth > ban.clientWidth + 1 || ban.scrollHeight > ban.clientHeight + 1 };
  }
  var node = document.getElementById('layout');
  if (!node) { node = document.createElement('script'); node.id = 'layout'; node.type = 'application/json'; body.appendChild(node); }
  node.textContent = JSON.stringify(out).replace(/</g, '\\u003c');
}

// ---- zoom, scroll, bands ----
function zoomTo(z, clientX) {
  var rect = scroller.getBoundingClientRect(), cx = clientX === undefined ? rect.width / 2 : clientX - rect.left;
  var t = Lay.tof(ax(), scroller.scrollLeft + cx - PAD, state.zoom);
  state.zoom = Math.max(0.05, Math.min(5000, z));
  render(Math.max(0, xof(t) - cx));
}
scroller.addEventListener('scroll', function () {
  if (pending) return;
  var sl = scroller.scrollLeft, cw = scroller.clientWidth;
  if ((sl < VX0 + cw * 0.5 && VX0 > 0) || (sl + cw > VX1 - cw * 0.5 && VX1 < Wcur)) {
    pending = true;
    requestAnimationFrame(function () { pending = false; render(); });
  }
});
svg.addEventListener('click', function (ev) {
  var b = ev.target.closest ? ev.target.closest('[data-band]') : null;
  if (!b) return;
  var id = b.getAttribute('data-band');
  if (state.open[id]) delete state.open[id]; else state.open[id] = true;
  render();
});
document.getElementById('zoom-in').addEventListener('click', function () { zoomTo(state.zoom * 1.5); });
document.getElementById('zoom-out').addEventListener('click', function () { zoomTo(state.zoom / 1.5); });
document.getElementById('zoom-fit').addEventListener('click', function () { state.zoom = 1; render(0); });
var cb = document.getElementById('compress');
cb.checked = state.compressed;
cb.addEventListener('change', function () { state.compressed = cb.checked; state.zoom = 1; render(0); });
scroller.addEventListener('wheel', function (ev) {
  if (!ev.ctrlKey) return;
  ev.preventDefault();
  zoomTo(state.zoom * (ev.deltaY < 0 ? 1.25 : 0.8), ev.clientX);
}, { passive: false });
render();
// #zoom=Z&at=SECONDS opens the page zoomed in at a moment (links in a workshop handout, screenshots), on
// load and whenever the address's #part changes (a link within the page, the back button).
function openFromHash() {
  var hs = location.hash.slice(1).split('&'), qs = {};
  for (var n = 0; n < hs.length; n++) { var kv = hs[n].split('='); qs[kv[0]] = kv[1]; }
  if (qs.zoom) { state.zoom = Math.max(0.05, Math.min(5000, Number(qs.zoom) || 1)); render(0); }
  if (qs.at !== undefined) render(Math.max(0, xof(Number(qs.at) || 0) - scroller.clientWidth / 3));
}
openFromHash();
window.addEventListener('hashchange', openFromHash);
// #selftest (used by the tests in a headless browser): tooltips, zoom, a band, the axis toggle, then back.
if (location.hash === '#selftest') {
  var targets = svg.querySelectorAll('[data-ev]'), tips = 0;
  for (var st = 0; st < targets.length; st += Math.max(1, Math.floor(targets.length / 25))) {
    targets[st].dispatchEvent(new MouseEvent('mousemove', { bubbles: true, clientX: 100, clientY: 100 }));
    if (tip.textContent.indexOf('true time') >= 0) tips++;
  }
  body.setAttribute('data-selftest-tip', tip.textContent);
  body.setAttribute('data-selftest-tips', String(tips));
  var firstBand = svg.querySelector('[data-band]');
  if (firstBand) {
    var before = svg.querySelectorAll('.msg').length;
    firstBand.dispatchEvent(new MouseEvent('click', { bubbles: true }));
    body.setAttribute('data-selftest-band', String(svg.querySelectorAll('.msg').length - before));
  }
  document.getElementById('zoom-in').click(); document.getElementById('zoom-in').click();
  scroller.dispatchEvent(new WheelEvent('wheel', { ctrlKey: true, deltaY: -100, clientX: 300, bubbles: true, cancelable: true }));
  body.setAttribute('data-selftest-zoom', String(Math.round(state.zoom * 1000) / 1000));
  render(Math.max(0, (scroller.scrollWidth - scroller.clientWidth) / 2));
  body.setAttribute('data-selftest-middle', String(svg.querySelectorAll('.msg').length));
  cb.checked = false; cb.dispatchEvent(new Event('change')); cb.checked = true; cb.dispatchEvent(new Event('change'));
  document.getElementById('zoom-fit').click();
  tip.style.display = 'none';
  body.setAttribute('data-selftest', 'done');
}
})();
