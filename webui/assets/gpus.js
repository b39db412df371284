// torchxd's page, the GPUs: a tile per GPU (holder, health, use and memory
// with 10-minute sparklines, an idle flag), a 24-hour timeline of which app
// held which GPU (a row per GPU, a colour per user, a click opens the app),
// and on an app's page its GPUs' use and memory over its run. Charts are
// plain SVG drawn here: a few lines each, nothing to fetch from elsewhere.
// Uses app.js's helpers ($, el, appLink, api, go, S).
'use strict';

const SVG = 'http://www.w3.org/2000/svg';
const G = { gpus: null, history: null, timeline: null, timers: [], appCharts: null, wired: false };

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
}

// A stable colour per user: the same user, the same hue, everywhere on the page.
function userColour(name) {
  let h = 0;
  for (const c of String(name)) h = (h * 31 + c.codePointAt(0)) >>> 0;
  return `hsl(${h % 360}, 62%, 48%)`;
}

function duration(ms) {
  const m = Math.round(ms / 60000);
  if (m < 1) return Math.round(ms / 1000) + ' s';
  if (m < 60) return m + ' min';
  return Math.floor(m / 60) + ' h ' + (m % 60 ? (m % 60) + ' min' : '');
}

function mib(v) {
  if (v === null || v === undefined) return '–';
  return v >= 1024 ? (v / 1024).toFixed(1) + ' GiB' : Math.round(v) + ' MiB';
}

// A polyline of `values` (null = a gap) scaled to [0, max] in a w×h box.
function sparkline(values, max, w, h, cls) {
  const s = svg('svg', { viewBox: `0 0 ${w} ${h}`, class: 'spark ' + cls, preserveAspectRatio: 'none', role: 'img' });
  s.appendChild(svg('rect', { x: 0, y: 0, width: w, height: h, class: 'spark-bg' }));
  const n = values.length;
  let d = '', pen = false;
  values.forEach((v, i) => {
    if (v === null || v === undefined || !max) { pen = false; return; }
    const x = n > 1 ? (i * w) / (n - 1) : w;
    const y = h - (Math.min(v, max) / max) * (h - 2) - 1;
    d += (pen ? 'L' : 'M') + x.toFixed(1) + ' ' + y.toFixed(1);
    pen = true;
  });
  if (d) s.appendChild(svg('path', { d, class: 'spark-line' }));
  return s;
}

// ---- tiles ----------------------------------------------------------------
function holderOf(g) {
  const box = el('div', null, 'holder');
  if (g.held_by) {
    box.append(appLink(g.held_by.app_handle, g.held_by.app_handle.split('/').pop()));
    const who = el('span', ' · ' + (g.held_by.user_name || g.held_by.user), 'user');
    who.style.color = userColour(g.held_by.user_name || g.held_by.user);
    box.append(who);
  } else if (!g.usable) {
    // An unhealthy GPU's reason is on its own line below.
    box.append(el('span', g.health !== 'ok' ? 'out of service' : 'out of service: ' + (g.unusable || ''), 'bad'));
  } else if (g.reserved_for) {
    box.append(el('span', 'reserved for '), appLink(g.reserved_for, g.reserved_for.split('/').pop()));
  } else {
    box.append(el('span', 'free', 'free'));
  }
  return box;
}

function renderTiles() {
  const tiles = $('gpu-tiles');
  const reply = G.gpus;
  if (!reply) return;
  if (reply.error) { $('gpu-note').textContent = reply.error.message; tiles.replaceChildren(); return; }
  const gpus = reply.gpus || [];
  const free = gpus.filter((g) => !g.held_by && g.usable).length;
  const sampling = reply.sampling || {};
  $('gpu-note').textContent = !gpus.length ? 'no GPUs on this box'
    : `${free} of ${gpus.length} free` + (sampling.off ? ' · no readings (sampling is off)'
      : sampling.error ? ' · no readings: ' + sampling.error : '');
  const series = new Map(((G.history && G.history.gpus) || []).map((h) => [h.index, h]));
  const now = sampling.sampled_ms || Date.now();
  tiles.replaceChildren(...gpus.map((g) => {
    const tile = el('article', null, 'gpu-tile' + (g.health !== 'ok' ? ' unhealthy' : g.held_by ? ' held' : ''));
    tile.dataset.gpu = g.index;
    const head = el('div', null, 'tile-head');
    const name = el('strong', 'GPU ' + g.index);
    if (g.mig_parent !== undefined) name.append(el('span', ` · MIG of GPU ${g.mig_parent}`, 'note small'));
    // Compact: temperature and power on the name's line, a line per metric with its sparkline.
    const extra = [];
    if (g.temperature_c !== null && g.temperature_c !== undefined) extra.push(g.temperature_c + ' °C');
    if (g.power_w !== null && g.power_w !== undefined) extra.push(Math.round(g.power_w) + ' W');
    head.append(name, el('span', extra.join(' · '), 'note small readings'),
      el('span', g.health === 'ok' ? (g.usable ? 'ok' : 'drained') : 'unhealthy',
        'badge ' + (g.health !== 'ok' ? 'bad' : g.usable ? 'ok' : 'warn')));
    tile.append(head, holderOf(g));
    if (g.held_by && g.reserved_for) {
      // Held now, and the queue's head waits for it: who gets it next.
      const next = el('div', null, 'note small holder reserved');
      next.append(el('span', 'then reserved for '), appLink(g.reserved_for, g.reserved_for.split('/').pop()));
      tile.append(next);
    }
    if (g.health_reason) tile.append(el('div', g.health_reason, 'bad reason'));
    if (g.idle_since_ms) tile.append(el('div', `idle for ${duration(now - g.idle_since_ms)}`, 'warn idle'));
    const h = series.get(g.index) || { util_gpu: [], memory_used_mb: [] };
    const util = el('div', null, 'metric');
    util.append(el('span', 'util ' + (g.util_gpu === null ? '–' : g.util_gpu + '%'), 'value util'),
      sparkline(h.util_gpu, 100, 200, 16, 'util'));
    const mem = el('div', null, 'metric');
    mem.append(el('span', 'mem ' + mib(g.memory_used_mb) + ' / ' + mib(g.memory_total_mb), 'value mem'),
      sparkline(h.memory_used_mb, g.memory_total_mb || 0, 200, 16, 'mem'));
    tile.append(util, mem);
    tile.title = g.uuid || '';
    return tile;
  }));
}

// ---- the timeline -----------------------------------------------------------
const DAY = 24 * 3600 * 1000;
const SPANS = { '1h': 3600 * 1000, '6h': 6 * 3600 * 1000, '24h': DAY };

function renderTimeline() {
  const box = $('gpu-timeline');
  const t = G.timeline;
  const count = G.gpus && G.gpus.gpus ? G.gpus.gpus.length : 0;
  if (!t || t.error || !count) { box.replaceChildren(); $('timeline-section').hidden = !count; return; }
  $('timeline-section').hidden = false;
  // Drawn at the box's own width, so its text keeps its size on a phone.
  const W = Math.max(300, Math.round(box.clientWidth || 1000)), label = 50, rowH = 20, top = 4, axis = 18;
  const H = top + count * rowH + axis;
  const span = SPANS[$('timeline-span').value] || DAY, from = t.to_ms - span;
  const x = (ms) => label + ((Math.max(ms, from) - from) / span) * (W - label - 4);
  const s = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'timeline', role: 'img',
    'aria-label': 'which app held each GPU over the span chosen' });
  for (let i = 0; i < count; i++) {
    const y = top + i * rowH;
    s.appendChild(svg('rect', { x: label, y, width: W - label - 4, height: rowH - 4, class: 'lane' }));
    s.appendChild(svg('text', { x: 0, y: y + rowH - 8, class: 'lane-label' }, 'GPU ' + i));
  }
  for (let k = 0; k <= 4; k++) {  // quarters of the span
    const at = from + (k * span) / 4, tx = x(at);
    s.appendChild(svg('line', { x1: tx, x2: tx, y1: top, y2: H - axis + 2, class: 'tick' }));
    const d = new Date(at);
    const text = String(d.getHours()).padStart(2, '0') + ':' + String(d.getMinutes()).padStart(2, '0');
    s.appendChild(svg('text', { x: tx, y: H - 4, class: 'tick-label', 'text-anchor': k === 0 ? 'start' : k === 4 ? 'end' : 'middle' },
      k === 4 ? 'now' : text));
  }
  const users = new Map();
  for (const iv of t.intervals || []) {
    if (iv.gpu >= count) continue;
    const who = iv.user_name || String(iv.user);
    users.set(who, userColour(who));
    const a = svg('a', { href: '/apps/' + encodeURIComponent(iv.app_handle), class: 'bar' });
    a.dataset.handle = iv.app_handle;
    a.addEventListener('click', (e) => { if (!e.ctrlKey && !e.metaKey) { e.preventDefault(); go(a.getAttribute('href')); } });
    const x0 = x(iv.from_ms), x1 = Math.max(x(iv.to_ms), x0 + 2);
    const r = svg('rect', { x: x0, y: top + iv.gpu * rowH, width: x1 - x0, height: rowH - 4, rx: 2, fill: users.get(who) });
    const until = iv.held ? 'now' : new Date(iv.to_ms).toLocaleTimeString();
    r.appendChild(svg('title', {}, `${iv.app_handle.split('/').pop()} · ${who} · ${new Date(iv.from_ms).toLocaleTimeString()}–${until}`));
    a.appendChild(r);
    s.appendChild(a);
  }
  const legend = el('div', null, 'legend');
  for (const [who, colour] of users) {
    const item = el('span', who, 'legend-item');
    const dot = el('i');
    dot.style.background = colour;
    item.prepend(dot);
    legend.append(item);
  }
  box.replaceChildren(s, legend);
}

// ---- refreshing -------------------------------------------------------------
async function refreshGpus() {
  try { G.gpus = await api('/api/gpus'); } catch (e) { G.gpus = { error: { message: e.message } }; }
  renderTiles();
}

async function refreshHistory() {
  const params = JSON.stringify({ from_ms: Date.now() - 600000, points: 120 });
  try { G.history = await api('/api/gpu_history?params=' + encodeURIComponent(params)); } catch { G.history = null; }
  renderTiles();
}

async function refreshTimeline() {
  const span = SPANS[$('timeline-span').value] || DAY;
  const params = JSON.stringify({ since_ms: Date.now() - span });
  try { G.timeline = await api('/api/gpu_timeline?params=' + encodeURIComponent(params)); } catch (e) { G.timeline = { error: e }; }
  renderTimeline();
}

// While the list is shown and the tab looked at: readings every 2 s, the
// sparklines every 10 s, the timeline every 30 s (and when apps change).
function gpuListShown(shown) {
  if (!G.wired) {  // this file loads before app.js: its controls are wired on first use
    G.wired = true;
    $('timeline-span').addEventListener('change', refreshTimeline);
    let resize = null;
    window.addEventListener('resize', () => {
      clearTimeout(resize);
      resize = setTimeout(() => {
        if (S.view === 'list') renderTimeline();
        else if (S.status) { G.appCharts = null; renderAppGpus(S.status); }
      }, 200);
    });
  }
  for (const t of G.timers) clearInterval(t);
  G.timers = [];
  if (!shown) return;
  refreshGpus().then(refreshHistory).then(refreshTimeline);
  G.timers.push(setInterval(() => { if (!document.hidden) refreshGpus(); }, 2000));
  G.timers.push(setInterval(() => { if (!document.hidden) refreshHistory(); }, 10000));
  G.timers.push(setInterval(() => { if (!document.hidden) refreshTimeline(); }, 30000));
}

let gpuChangeTimer = null;
function gpuAppsChanged() {  // an app was admitted or ended: who holds what moved
  clearTimeout(gpuChangeTimer);
  gpuChangeTimer = setTimeout(() => { if (S.view === 'list') { refreshGpus(); refreshTimeline(); } }, 300);
}

// ---- one app's GPUs -------------------------------------------------------------
// A line per GPU over [from, to]: util (0–100 %) or memory (0–max MiB).
function lineChart(title, lines, from, to, max, unit, width) {
  const W = Math.max(280, Math.round(width)), H = 160, left = 52, bottom = 18, top = 8;
  const fig = el('figure', null, 'chart');
  fig.append(el('figcaption', title));
  const s = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title });
  const x = (ms) => left + ((ms - from) / Math.max(1, to - from)) * (W - left - 6);
  const y = (v) => top + (1 - Math.min(v, max) / max) * (H - top - bottom);
  for (const f of [0, 0.5, 1]) {
    s.appendChild(svg('line', { x1: left, x2: W - 6, y1: y(max * f), y2: y(max * f), class: 'grid' }));
    s.appendChild(svg('text', { x: 2, y: y(max * f) + 4, class: 'tick-label' }, unit === '%' ? Math.round(max * f) + '%' : mib(max * f)));
  }
  s.appendChild(svg('text', { x: left, y: H - 3, class: 'tick-label' }, new Date(from).toLocaleTimeString()));
  s.appendChild(svg('text', { x: W - 6, y: H - 3, class: 'tick-label', 'text-anchor': 'end' }, new Date(to).toLocaleTimeString()));
  for (const line of lines) {
    let d = '', pen = false;
    line.at.forEach((at, i) => {
      const v = line.values[i];
      if (v === null) { pen = false; return; }
      d += (pen ? 'L' : 'M') + x(at).toFixed(1) + ' ' + y(v).toFixed(1);
      pen = true;
    });
    if (d) s.appendChild(svg('path', { d, class: 'chart-line', stroke: line.colour }));
  }
  fig.append(s);
  const legend = el('div', null, 'legend');
  for (const line of lines) {
    const item = el('span', line.name, 'legend-item');
    const dot = el('i');
    dot.style.background = line.colour;
    item.prepend(dot);
    legend.append(item);
  }
  fig.append(legend);
  return fig;
}

const LINE_COLOURS = ['#0969da', '#c2410c', '#1a7f37', '#8250df', '#bf3989', '#9a6700', '#0a7f8c', '#57606a'];

async function renderAppGpus(status) {
  const box = $('app-gpus');
  const usage = status && status.gpu_usage;
  if (!usage || !usage.intervals.length) { box.hidden = true; box.replaceChildren(); return; }
  box.hidden = false;
  const now = Date.now();
  const from = Math.min(...usage.intervals.map((i) => i.from_ms));
  const to = Math.max(...usage.intervals.map((i) => (i.to_ms === null ? now : i.to_ms)));
  const gpus = [...new Set(usage.intervals.map((i) => i.gpu))].sort((a, b) => a - b);
  const key = status.app_handle + '|' + gpus.join(',') + '|' + from + '|' + (usage.intervals.some((i) => i.to_ms === null) ? Math.floor(now / 10000) : to);
  if (G.appCharts === key) return;  // drawn for this span already (running apps redraw every 10 s)
  G.appCharts = key;
  if (!G.gpus) await refreshGpus();  // each GPU's memory size scales the memory chart
  const replies = await Promise.all(gpus.map((g) => api('/api/gpu_history?params=' +
    encodeURIComponent(JSON.stringify({ gpu: g, from_ms: from, to_ms: to, points: 300 }))).catch(() => null)));
  if (S.view !== 'app' || !S.status || S.status.app_handle !== status.app_handle) return;
  const util = [], mem = [];
  let memMax = 0;
  replies.forEach((r, k) => {
    const h = r && r.gpus && r.gpus[0];
    if (!h) return;
    const colour = LINE_COLOURS[k % LINE_COLOURS.length];
    util.push({ name: 'GPU ' + gpus[k], colour, at: h.at_ms, values: h.util_gpu });
    mem.push({ name: 'GPU ' + gpus[k], colour, at: h.at_ms, values: h.memory_used_mb });
    for (const v of h.memory_used_mb) if (v !== null) memMax = Math.max(memMax, v);
  });
  const total = (G.gpus && G.gpus.gpus && G.gpus.gpus[gpus[0]] && G.gpus.gpus[gpus[0]].memory_total_mb) || memMax || 1;
  const held = usage.gpu_seconds_held, used = usage.gpu_seconds_used;
  const summary = el('p', `${gpus.length} GPU${gpus.length === 1 ? '' : 's'} (${gpus.join(', ')}) · ` +
    `${(held / 3600).toFixed(2)} GPU-hours held, ${(used / 3600).toFixed(2)} used` +
    (held > 0 ? ` (${Math.round((100 * used) / held)}%)` : ''), 'note');
  box.replaceChildren(el('h3', 'GPUs'), summary, el('div', null, 'charts'));
  const narrow = window.matchMedia('(max-width: 700px)').matches;  // one column there (app.css)
  const width = narrow ? box.clientWidth : (box.clientWidth - 13) / 2;
  box.lastChild.append(lineChart('GPU utilization', util, from, to, 100, '%', width),
    lineChart('GPU memory used', mem, from, to, total, 'MiB', width));
}
