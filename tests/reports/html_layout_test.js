// Unit tests of the HTML report's pure layout functions (reports/html/layout.js), run by ctest under node:
// the axis mapping time → x and back, squeezed gaps, tick labels, label placement, message bands.
'use strict';
const assert = require('assert');
const path = require('path');
const Lay = require(path.join(__dirname, '..', '..', 'reports', 'html', 'layout.js'));

let failed = 0, passed = 0;
function test(name, f) {
  try { f(); passed++; } catch (e) { failed++; console.error('FAIL ' + name + '\n  ' + (e.stack || e)); }
}
const near = (a, b, eps, what) => assert.ok(Math.abs(a - b) <= eps, `${what}: ${a} vs ${b} (±${eps})`);
const parse = (text) => { assert.match(text, /^-?[0-9.]+ s$/); return Number(text.slice(0, -2)); };

// A run like kleppmann-gc-pause: a burst at 0, one at 10 s, one at 15 s, idle in between.
const burst = [0, 0.002, 0.004, 0.01, 10, 10.001, 10.132, 10.133, 15, 15.002, 15.003, 15.006];
const END = 15.006;

test('a linear axis maps time to x and back at every zoom', () => {
  const ax = Lay.buildAxis(burst, END, 1000, false);
  assert.strictEqual(ax.breaks, 0);
  for (const z of [1, 3.5, 40]) {
    near(Lay.width(ax, z), 1000 * z, 1e-6, 'width');
    for (const t of [0, 1.25, 7.5, 10.132, END]) {
      near(Lay.xof(ax, t, z), t * 1000 * z / END, 1e-6, 'x of ' + t);
      near(Lay.tof(ax, Lay.xof(ax, t, z), z), t, 1e-9, 'time of x of ' + t);
    }
  }
});

test('idle gaps are squeezed into breaks; the rest keeps one scale; nothing drawn falls in a break', () => {
  const ax = Lay.buildAxis(burst, END, 1000, true);
  assert.strictEqual(ax.breaks, 2);
  near(Lay.width(ax, 1), 1000, 1e-6, 'fit width');
  const br = Lay.breaks(ax, 1);
  near(br[0].t0, 0.01, 1e-12, 'first gap starts'); near(br[0].t1, 10, 1e-12, 'first gap ends');
  assert.strictEqual(br[0].text, '\u2248 9.99 s');
  for (const t of burst) assert.ok(!Lay.inBreak(ax, Lay.xof(ax, t, 1), 1), t + ' s drawn in a break');
  // One scale: the same time is the same distance in every burst.
  near(Lay.xof(ax, 0.01, 1) - Lay.xof(ax, 0, 1), ax.S * 0.01, 1e-6, 'first burst');
  near(Lay.xof(ax, 10.133, 1) - Lay.xof(ax, 10, 1), ax.S * 0.133, 1e-6, 'second burst');
  for (const z of [1, 2, 50]) {
    const b = Lay.breaks(ax, z);
    b.forEach((x, i) => near(x.x1 - x.x0, br[i].x1 - br[i].x0, 1e-9, 'a break keeps its width when zoomed'));
    for (const t of burst) near(Lay.tof(ax, Lay.xof(ax, t, z), z), t, 1e-9, 'time of x of ' + t);
    let last = -1;
    for (let t = 0; t <= END; t += 0.001) { const x = Lay.xof(ax, t, z); assert.ok(x >= last, 'monotone'); last = x; }
  }
});

test('a gap is not squeezed when squeezing buys no room', () => {
  const ax = Lay.buildAxis([...Array(21).keys()], 20, 1000, true);  // busy all along: no idle gap
  assert.strictEqual(ax.breaks, 0);
  const few = Lay.buildAxis([0, 0.5, 1], 1, 300, true);  // a gap that would be narrower than three breaks
  assert.strictEqual(few.breaks, 0);
});

test('tick labels are true times at their places, one per stretch at least, none overlapping', () => {
  const ax = Lay.buildAxis(burst, END, 1000, true);
  for (const z of [1, 6]) {
    const w = Lay.width(ax, z), tk = Lay.ticks(ax, z, 0, w, Lay.estimate, 30), S = ax.S * z;
    for (const t of tk) {
      near(Lay.xof(ax, t.t, z), t.x, 1e-9, 'tick place');
      near(parse(t.text), t.t, 0.5 / S, 'tick text ' + t.text);
    }
    for (const p of ax.pieces.filter((q) => q.kind === 'lin'))
      assert.ok(tk.some((t) => t.t === p.t0), 'a tick at ' + p.t0 + ' s, where a stretch starts');
    for (let i = 0; i < tk.length; i++)
      for (let j = i + 1; j < tk.length; j++) {
        const a = tk[i], b = tk[j];
        if (a.row === b.row) assert.ok(a.box[0] + a.box[1] <= b.box[0] || b.box[0] + b.box[1] <= a.box[0], a.text + ' overlaps ' + b.text);
      }
    for (const t of tk) assert.ok(t.box[0] + t.box[1] <= w + 30 + 1e-9, t.text + ' runs off the end');
  }
});

test('texts', () => {
  assert.strictEqual(Lay.secondsText(10, 3), '10 s');
  assert.strictEqual(Lay.secondsText(10.1325, 3), '10.133 s');
  assert.strictEqual(Lay.secondsText(2.5, 1), '2.5 s');
  assert.strictEqual(Lay.durationText(45.0), '\u2248 45.0 s');
  assert.strictEqual(Lay.durationText(0.0123), '\u2248 0.0123 s');
});

test('labels are placed only where they touch no label placed before', () => {
  const p = new Lay.Placer();
  assert.strictEqual(p.place([[0, 0, 50, 14]]), 0);
  assert.strictEqual(p.place([[40, 5, 50, 14]]), -1);
  assert.strictEqual(p.place([[40, 5, 50, 14], [40, 14, 50, 14]]), 1);
  assert.strictEqual(p.place([[50, 0, 10, 14]]), 0, 'touching edges do not overlap');
  assert.ok(!p.fits([[200, 200, 1, 1]][0]) === false);
});

test('repeated messages of one sender become a band; sparse ones stay arrows', () => {
  const msgs = [];
  for (let i = 0; i < 10; i++) msgs.push({ key: 'client2|SET', x0: i * 5, x1: i * 5 + 3 });
  msgs.push({ key: 'client1|SET', x0: 20, x1: 30 });
  for (let i = 0; i < 3; i++) msgs.push({ key: 'redis1|OK', x0: 100 + i * 100, x1: 101 + i * 100 });
  const g = Lay.groupMessages(msgs, 24, 6);
  assert.strictEqual(g.bands.length, 1);
  assert.strictEqual(g.bands[0].members.length, 10);
  assert.strictEqual(g.bands[0].id, 'client2|SET@0');
  near(g.bands[0].x1, 48, 1e-9, 'band end');
  assert.deepStrictEqual(g.singles, [10, 11, 12, 13]);
  // A pause in the retries splits the run.
  const split = Lay.groupMessages(msgs.slice(0, 5).concat(msgs.slice(5, 10).map((m) => ({ key: m.key, x0: m.x0 + 500, x1: m.x1 + 500 }))), 24, 5);
  assert.strictEqual(split.bands.length, 2);
});

test('bands of one lane take rows where they cover no other band; other lanes are apart', () => {
  const rows = new Lay.BandRows(), offs = [-4, -14, 6];
  assert.strictEqual(rows.place(0, 10, 100, offs, 8), -4);
  assert.strictEqual(rows.place(0, 50, 150, offs, 8), -14, 'overlapping in time: the next row');
  assert.strictEqual(rows.place(0, 60, 70, offs, 8), 6);
  assert.strictEqual(rows.place(0, 200, 300, offs, 8), -4, 'clear of the others: the first row again');
  assert.strictEqual(rows.place(1, 10, 100, offs, 8), -4, 'another lane');
  assert.strictEqual(rows.place(0, 62, 66, offs, 8), -4, 'no row free: the first (drawn over)');
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
