// The envelope page's behaviour: a click on a cell shows the command that replays its first unsafe run, and
// the page reports what it drew (boxes in window pixels) in a <script id="layout"> for the tests.
// "#click=PROTOCOL:INDEX" in the address clicks that cell once the page is drawn.
(function () {
  'use strict';
  let errors = 0;
  window.addEventListener('error', function () {
    errors += 1;
    document.body.setAttribute('data-js-errors', String(errors));
  });

  function box(el) {
    const r = el.getBoundingClientRect();
    return [r.left, r.top, r.width, r.height];
  }

  function show(cell) {
    const section = cell.closest('.protocol');
    for (const c of section.querySelectorAll('.cell.selected')) c.classList.remove('selected');
    cell.classList.add('selected');
    const pre = section.querySelector('pre.command');
    const cmd = cell.getAttribute('data-command');
    const where = cell.querySelector('title').textContent;
    pre.textContent = cmd ? cmd : where + ': no unsafe run here to replay';
  }

  function layout() {
    const out = { viewport: [window.innerWidth, window.innerHeight], protocols: [] };
    for (const section of document.querySelectorAll('.protocol')) {
      const p = {
        protocol: section.getAttribute('data-protocol'),
        plot: box(section.querySelector('.frame')),
        cells: [],
        crossings: [],
        ticks: [],
        titles: [],
        command: section.querySelector('pre.command').textContent,
      };
      for (const c of section.querySelectorAll('.cell')) {
        p.cells.push({
          index: Number(c.getAttribute('data-index')),
          at: JSON.parse(c.getAttribute('data-at')),
          fraction: Number(c.getAttribute('data-fraction')),
          status: c.getAttribute('data-status'),
          box: box(c),
        });
      }
      for (const c of section.querySelectorAll('.crossing')) p.crossings.push({ box: box(c) });
      for (const t of section.querySelectorAll('.tick')) {
        p.ticks.push({ axis: t.getAttribute('data-axis'), value: Number(t.getAttribute('data-value')),
          text: t.textContent, box: box(t) });
      }
      for (const t of section.querySelectorAll('.axis-title')) p.titles.push(t.textContent);
      out.protocols.push(p);
    }
    const s = document.createElement('script');
    s.id = 'layout';
    s.type = 'application/json';
    s.textContent = JSON.stringify(out);
    document.body.appendChild(s);
  }

  function start() {
    for (const c of document.querySelectorAll('.cell')) c.addEventListener('click', function () { show(c); });
    const m = /#click=([^:]+):(\d+)/.exec(decodeURIComponent(window.location.hash));
    if (m) {
      for (const section of document.querySelectorAll('.protocol')) {
        if (section.getAttribute('data-protocol') !== m[1]) continue;
        const c = section.querySelector('.cell[data-index="' + m[2] + '"]');
        if (c) c.dispatchEvent(new MouseEvent('click', { bubbles: true }));
      }
    }
    layout();
    document.body.setAttribute('data-js-errors', String(errors));
    document.body.setAttribute('data-rendered', '1');
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
