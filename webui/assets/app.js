// torchxd's page: the app list, GPUs (gpus.js) and queue, one app's replicas
// and a live log tail, from one Server-Sent Events stream (/api/events). Text from
// apps and logs is only ever set with textContent.
'use strict';

const $ = (id) => document.getElementById(id);
const MAX_LINES = 5000;
const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);
// ANSI escape sequences (colours, cursor moves, OSC titles) are stripped.
const ANSI = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]/g;

const S = {
  session: null, apps: [], queue: null, status: null, es: null, view: 'list',
  app: null, role: null, replica: 0, stream: 'combined', regex: '', lastEventId: '',
  paused: false, held: [], cancelling: false,
};

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function row(cells) {
  const tr = document.createElement('tr');
  for (const c of cells) {
    if (c instanceof Node) { const td = el('td'); td.appendChild(c); tr.appendChild(td); } else tr.appendChild(el('td', c));
  }
  return tr;
}

function ago(ms) {
  let s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return s + 's';
  const m = Math.floor(s / 60); s %= 60;
  if (m < 60) return m + 'm' + (s ? s + 's' : '');
  const h = Math.floor(m / 60);
  if (h < 48) return h + 'h' + (m % 60 ? (m % 60) + 'm' : '');
  return Math.floor(h / 24) + 'd' + (h % 24 ? (h % 24) + 'h' : '');
}

function appLink(handle, text) {
  const a = el('a', text);
  a.href = '/apps/' + encodeURIComponent(handle);
  a.addEventListener('click', (e) => { if (!e.ctrlKey && !e.metaKey) { e.preventDefault(); go(a.href); } });
  return a;
}

function banner(text) {
  const b = $('banner');
  b.hidden = !text;
  b.textContent = text || '';
}

async function api(path, options) {
  const r = await fetch(path, Object.assign({ credentials: 'same-origin' }, options || {}));
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error ? body.error.message : r.status + ' ' + r.statusText);
  return body;
}

// ---- routing -------------------------------------------------------------
function parseRoute() {
  const q = new URLSearchParams(location.search);
  if (location.pathname.startsWith('/apps/')) {
    S.view = 'app';
    S.app = decodeURIComponent(location.pathname.slice(6));
    S.role = q.get('role');
    S.replica = Number(q.get('replica') || 0);
    S.stream = q.get('stream') || 'combined';
    S.regex = q.get('regex') || '';
  } else {
    S.view = 'list';
    S.app = null;
    S.at = location.pathname === '/queue' ? 'queue-title' : null;  // a deep link into the list view
  }
}

function tailUrl() {
  const q = new URLSearchParams();
  if (S.role !== null) { q.set('role', S.role); q.set('replica', S.replica); }
  if (S.stream !== 'combined') q.set('stream', S.stream);
  if (S.regex) q.set('regex', S.regex);
  const qs = q.toString();
  return '/apps/' + encodeURIComponent(S.app) + (qs ? '?' + qs : '');
}

function go(url, replace) {
  if (replace) history.replaceState(null, '', url); else history.pushState(null, '', url);
  show();
}

window.addEventListener('popstate', show);

// A deep link (/queue) stays where it points while what is above it is still
// being drawn (GPU tiles, the app table arrive in any order), until the
// user scrolls, clicks or types.
new ResizeObserver(() => {
  if (S.at && S.view === 'list' && S.queue) $(S.at).scrollIntoView({ block: 'start' });
}).observe(document.body);
for (const ev of ['wheel', 'touchstart', 'keydown', 'mousedown']) {
  window.addEventListener(ev, () => { S.at = null; }, { passive: true });
}

async function show() {
  const before = S.app;
  closeStream();  // nothing of the previous view may land in this one
  parseRoute();
  $('list-view').hidden = S.view !== 'list';
  $('app-view').hidden = S.view !== 'app';
  S.status = null;
  G.appCharts = null;
  gpuListShown(S.view === 'list');
  clearLog();
  S.lastEventId = '';
  if (S.view === 'app') {
    if (before !== S.app) { $('app-title').textContent = S.app; $('replica-table').tBodies[0].replaceChildren(); }
    $('t-stream').value = S.stream;
    $('t-regex').value = S.regex;
    try {
      onStatus(await api('/api/status?app_handle=' + encodeURIComponent(S.app)));
    } catch (e) {
      $('app-summary').textContent = e.message;
    }
    if (S.role === null && S.status) {
      const first = replicasOf(S.status)[0];
      if (first) { S.role = first.role; S.replica = first.id; history.replaceState(null, '', tailUrl()); }
    }
    updateDownload();
  } else {
    document.title = 'torchxd';
    renderApps();
  }
  openStream();
}

// ---- the stream ----------------------------------------------------------
// Browsers allow 6 HTTP/1.1 connections per origin across all tabs, so a tab
// streams only while it holds one of SLOTS Web Locks; the others wait without
// a connection. A tab looked at takes a slot over: it asks the holder (on a
// BroadcastChannel) to hand it over, and the holder closes its stream before
// it lets the lock go, so there are never more than SLOTS streams. The ask is
// repeated every ASK_AGAIN_MS while it waits: a tab that got the lock after
// the first ask (another tab's take-over) hears the next. A holder that does
// not hand over within HANDOVER_MS (a hung tab) loses the slot by force. API
// calls always find a free connection. Without Web Locks (not a secure
// context) every tab streams.
const SLOTS = 4;
const HANDOVER_MS = 10000;
const ASK_AGAIN_MS = 250;
const SLOT_LOCK = 'torchxd-stream-';
const slot = { held: null, release: null };
const handovers = navigator.locks && 'BroadcastChannel' in window ? new BroadcastChannel('torchxd-stream') : null;
if (handovers) {
  handovers.onmessage = (e) => {
    if (!slot.held || !e.data || e.data.handOver !== slot.held) return;
    closeStream();
    dropSlot();
    waiting();
  };
}

function closeStream() {
  if (S.es) { S.es.close(); S.es = null; }
}

// Resolves whether this tab holds a slot once the request for lock `name` is
// answered. A lock granted when the tab needs none (another call took a slot
// first, or the tab was hidden meanwhile) is let go at once.
function holdSlot(name, options) {
  return new Promise((resolve) => {
    navigator.locks.request(name, options, (lock) => {
      if (!lock || slot.held || document.hidden) { resolve(slot.held !== null); return undefined; }
      slot.held = name;
      resolve(true);
      return new Promise((release) => { slot.release = release; });
    }).catch(() => {  // taken by force, or the wait for a hand-over timed out
      if (slot.held === name) { slot.held = null; slot.release = null; closeStream(); waiting(); }
      resolve(slot.held !== null);
    });
  });
}

async function takeSlot(takeOver) {
  if (!navigator.locks) return true;
  if (slot.held) return true;
  for (let i = 0; i < SLOTS; i++) if (await holdSlot(SLOT_LOCK + i, { ifAvailable: true })) return true;
  if (!takeOver) return false;
  const name = SLOT_LOCK + Math.floor(Math.random() * SLOTS);
  if (handovers) {
    const ask = () => handovers.postMessage({ handOver: name });
    ask();
    const again = setInterval(ask, ASK_AGAIN_MS);
    const held = await holdSlot(name, { signal: AbortSignal.timeout(HANDOVER_MS) });
    clearInterval(again);
    if (held) return true;
    if (document.hidden) return false;
  }
  return holdSlot(name, { steal: true });
}

function dropSlot() {
  if (slot.release) slot.release();
  slot.held = null;
  slot.release = null;
}

function waiting() {
  banner('paused: other tabs are showing live updates; click here or switch to this tab to resume');
}

async function openStream(steal) {
  closeStream();
  if (document.hidden) { dropSlot(); return; }  // a hidden tab holds no connection; it resumes when shown
  if (!(await takeSlot(steal))) { waiting(); return; }
  if (S.es) return;
  const q = new URLSearchParams();
  if (S.view === 'app') {
    q.set('app', S.app);
    if (S.role !== null) {
      q.set('role', S.role); q.set('replica', S.replica); q.set('stream', S.stream);
      if (S.regex) q.set('regex', S.regex);
      if (S.lastEventId) q.set('last_event_id', S.lastEventId);
    }
  }
  const es = new EventSource('/api/events?' + q.toString());
  S.es = es;
  es.onopen = () => { banner(null); live(true); };
  es.onerror = () => {
    banner('reconnecting…');
    live(false);
    if (es.readyState === EventSource.CLOSED) setTimeout(() => { if (S.es === es) openStream(); }, 2000);
  };
  es.addEventListener('apps', (e) => onApps(JSON.parse(e.data)));
  es.addEventListener('queue', (e) => onQueue(JSON.parse(e.data)));
  es.addEventListener('status', (e) => onStatus(JSON.parse(e.data)));
  es.addEventListener('log', (e) => {
    if (e.lastEventId) S.lastEventId = e.lastEventId;
    onLog(JSON.parse(e.data));
  });
  es.addEventListener('log-error', (e) => { $('t-error').textContent = JSON.parse(e.data).error.message; });
}

// Whether the page hears the daemon now, in the header.
function live(on) {
  const l = $('live');
  l.textContent = on ? 'live' : 'offline';
  l.className = 'live ' + (on ? 'on' : 'off');
  l.title = on ? 'following the daemon' : 'the daemon does not answer; reconnecting';
}

function reclaim() { if (!S.es && !document.hidden) openStream(true); }
document.addEventListener('visibilitychange', () => { if (document.hidden) { closeStream(); dropSlot(); } else reclaim(); });
window.addEventListener('focus', reclaim);
$('banner').addEventListener('click', reclaim);

// ---- list, GPUs, queue ---------------------------------------------------
function onApps(reply) {
  if (reply.error) { $('app-count').textContent = reply.error.message; return; }
  const f = reply.fields;
  S.apps = reply.apps.map((r) => Object.fromEntries(f.map((k, i) => [k, r[i]])));
  if (S.view === 'list') renderApps();
}

function renderApps() {
  const state = $('f-state').value, user = $('f-user').value.trim(), name = $('f-name').value.trim().toLowerCase();
  const now = Date.now();
  const rows = S.apps.filter((a) => (!state || a.state === state) && (!user || a.user === user) &&
    (!name || a.name.toLowerCase().includes(name) || a.app_id.toLowerCase().includes(name)));
  const body = $('app-table').tBodies[0];
  body.replaceChildren(...rows.map((a) => {
    const reason = el('span', a.msg || '', 'reason');
    reason.title = a.msg || '';
    const tr = row([appLink(a.app_handle, a.app_id), el('span', a.state, 'state ' + a.state), a.user || '',
      a.queue || '', a.scheduler, ago(now - a.created_ms), '-', reason]);
    // Its duration from its start; an app that never started has none.
    const start = a.started_ms === undefined ? a.created_ms : a.started_ms;
    if (start !== null) {
      tr.cells[6].dataset.start = start;
      if (a.ended_ms !== null) tr.cells[6].dataset.end = a.ended_ms;
    }
    tr.dataset.handle = a.app_handle;
    return tr;
  }));
  $('app-count').textContent = rows.length === S.apps.length ? `(${rows.length})` : `(${rows.length} of ${S.apps.length})`;
  tick();
}

// Durations and ages move every second without a server round trip.
function tick() {
  const now = Date.now();
  for (const td of document.querySelectorAll('td[data-start]')) {
    const end = td.dataset.end ? Number(td.dataset.end) : now;
    td.textContent = ago(end - Number(td.dataset.start));
  }
}
setInterval(tick, 1000);
// A running app's GPU charts move on (gpus.js redraws at most every 10 s).
setInterval(() => { if (S.view === 'app' && S.status && !document.hidden) renderAppGpus(S.status); }, 5000);

for (const id of ['f-state', 'f-user', 'f-name']) $(id).addEventListener('input', renderApps);

function needs(r) {
  const parts = [`${r.gpu || 0} GPU`];
  if (r.cpu) parts.push(`${r.cpu} CPU`);
  if (r.memMB) parts.push(`${r.memMB} MB`);
  return parts.join(', ');
}

function onQueue(reply) {
  S.queue = reply;
  const queueBody = $('queue-table').tBodies[0];
  if (reply.error) {
    $('queue-note').textContent = 'no queue: ' + reply.error.message;
    queueBody.replaceChildren();
    return;
  }
  gpuAppsChanged();  // the tiles and timeline (gpus.js) follow admission
  // As `torchx queue` lists them: queue by queue, each in the order it starts them.
  const pending = [];
  for (const q of reply.queues || []) for (const p of q.pending || []) pending.push(Object.assign({ queue: q.name }, p));
  $('queue-note').textContent = pending.length ? '' : 'nothing is waiting';
  queueBody.replaceChildren(...pending.map((p) => {
    const r = p.request || {};
    return row([String(p.position), appLink(p.app_handle, p.app_handle.split('/').pop()), p.queue, p.user_name || String(p.user),
      needs(r), p.reason]);
  }));
  if (S.at && S.view === 'list') $(S.at).scrollIntoView({ block: 'start' });  // /queue: there once it is drawn
}

// ---- one app -------------------------------------------------------------
function replicasOf(status) {
  const out = [];
  for (const role of status.roles || []) for (const r of role.replicas || []) out.push(r);
  const failing = (r) => (r.state_name === 'FAILED' ? 0 : 1);
  out.sort((a, b) => failing(a) - failing(b) || a.role.localeCompare(b.role) || a.id - b.id);
  return out;
}

function mayCancel(status) {
  if (!S.session || S.session.read_only || TERMINAL.has(status.state)) return false;
  if (S.session.admin) return true;
  return status.user === S.session.user;
}

function onStatus(status) {
  if (status.error) { $('app-summary').textContent = status.error.message; return; }
  if (S.view !== 'app' || status.app_handle !== S.app) return;
  S.status = status;
  const reps = replicasOf(status);
  document.title = status.app_handle.split('/').pop() + ' · ' + status.state + ' · torchxd';
  $('app-summary').replaceChildren(el('span', status.state, 'state ' + status.state),
    el('span', ` · ${reps.length} replica${reps.length === 1 ? '' : 's'} · ${status.num_restarts || 0} restarts`));
  $('app-msg').textContent = status.msg || '';
  $('cancel-btn').hidden = !mayCancel(status);
  renderAppGpus(status);
  refreshEvents(status.app_handle);
  // Nothing started yet (queued): its reason and timeline say it all; no empty log box.
  const started = replicasOf(status).some((r) => r.attempt > 0);
  $('tail').hidden = !started;
  const body = $('replica-table').tBodies[0];
  body.replaceChildren(...reps.map((r) => {
    const exit = r.signal ? 'signal ' + r.signal : r.exit_code === null ? '' : String(r.exit_code);
    const link = el('a', 'tail');
    link.href = tailFor(r.role, r.id);
    link.addEventListener('click', (e) => { e.preventDefault(); selectReplica(r.role, r.id); });
    const tr = row([r.role, String(r.id), el('span', r.state_name, 'state ' + r.state_name), String(r.attempt), exit,
      r.pid === null ? '' : String(r.pid), r.start_time || '', r.end_time || '', r.error_message || '', link]);
    if (r.role === S.role && r.id === S.replica) tr.className = 'selected';
    return tr;
  }));
  const sel = $('t-replica');
  const want = reps.map((r) => r.role + '/' + r.id);
  if ([...sel.options].map((o) => o.value).join() !== want.join()) {
    sel.replaceChildren(...want.map((w) => { const o = el('option', w); o.value = w; return o; }));
  }
  sel.value = S.role + '/' + S.replica;
}

function tailFor(role, id) {
  const save = [S.role, S.replica];
  [S.role, S.replica] = [role, id];
  const url = tailUrl();
  [S.role, S.replica] = save;
  return url;
}

function selectReplica(role, id) {
  S.role = role; S.replica = id;
  go(tailUrl());
}

$('t-replica').addEventListener('change', () => {
  const v = $('t-replica').value, slash = v.lastIndexOf('/');
  selectReplica(v.slice(0, slash), Number(v.slice(slash + 1)));
});
$('t-stream').addEventListener('change', () => { S.stream = $('t-stream').value; go(tailUrl()); });
let regexTimer = null;
$('t-regex').addEventListener('input', () => {
  clearTimeout(regexTimer);
  regexTimer = setTimeout(() => { S.regex = $('t-regex').value; go(tailUrl(), true); }, 400);
});

function updateDownload() {
  const q = new URLSearchParams({ app: S.app, stream: S.stream });
  if (S.role !== null) { q.set('role', S.role); q.set('replica', S.replica); }
  if (S.regex) q.set('regex', S.regex);
  $('t-download').href = '/api/log.txt?' + q.toString();
}

// ---- the app's events ----------------------------------------------------
let eventsTimer = null;
function refreshEvents(handle) {
  clearTimeout(eventsTimer);
  eventsTimer = setTimeout(async () => {
    let reply;
    try { reply = await api('/api/timeline?app_handle=' + encodeURIComponent(handle)); } catch (e) {
      $('event-list').replaceChildren(el('li', e.message, 'error'));
      return;
    }
    if (S.view !== 'app' || S.app !== handle) return;
    const list = $('event-list');
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 4;
    list.replaceChildren(...(reply.events || []).map((e) => {
      const failed = e.type === 'exited' && e.data && e.data.state !== 'SUCCEEDED';
      const li = el('li', null, 'event ' + e.type + (failed || e.type === 'gpu' ? ' bad' : ''));
      li.dataset.type = e.type;
      const when = new Date(e.time_ms);
      let text = (e.replica ? e.replica + ' ' : '') + e.text;
      if (e.data && Number.isInteger(e.data.starts_by_ms)) {
        const by = new Date(e.data.starts_by_ms);
        const day = by.toDateString() === new Date().toDateString() ? '' : by.toLocaleDateString() + ' ';
        text += '; starts by ' + day + by.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) + ' at the latest';
      }
      li.append(el('time', when.toLocaleTimeString(), 'note'), el('span', e.type, 'etype'), el('span', text, 'etext'));
      li.querySelector('time').dateTime = when.toISOString();
      return li;
    }));
    if (atBottom) list.scrollTop = list.scrollHeight;
  }, 200);
}

// ---- the log tail --------------------------------------------------------
function clearLog() {
  $('log').replaceChildren();
  $('t-error').textContent = '';
  S.held = [];
  updateNew();
}

function lineNodes(event) {
  if (event.lines) return event.lines.map((l) => document.createTextNode(l[1].replace(ANSI, '') + '\n'));
  const who = event.role + '/' + event.replica;
  let text = null;
  if (event.attempt !== undefined) text = `--- ${who} attempt ${event.attempt} ---`;
  else if (event.dropped_bytes !== undefined) text = `[${event.dropped_bytes} bytes before this were dropped by the log ring]`;
  else if (event.lost_bytes !== undefined) text = `[${event.lost_bytes} bytes could not be stored: the log disk was full]`;
  else if (event.missed_bytes !== undefined) text = `[missed ${event.missed_bytes} bytes removed by rotation]`;
  else if (event.warning !== undefined) text = `[warning: ${event.warning}]`;
  if (text === null) return [];
  const span = el('span', text + '\n', 'notice');
  return [span];
}

function onLog(event) {
  const nodes = lineNodes(event);
  if (!nodes.length) return;
  if (S.paused) { S.held.push(...nodes); updateNew(); return; }
  append(nodes);
}

function append(nodes) {
  const log = $('log');
  const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 4;
  log.append(...nodes);
  while (log.childNodes.length > MAX_LINES) log.removeChild(log.firstChild);
  if (atBottom) log.scrollTop = log.scrollHeight;
}

function updateNew() {
  const n = S.held.filter((x) => x.nodeType === Node.TEXT_NODE).length;
  $('t-new').hidden = !S.paused || n === 0;
  $('t-new').textContent = `${n} new line${n === 1 ? '' : 's'}`;
  $('t-pause').textContent = S.paused ? 'Resume' : 'Pause';
}

function setPaused(paused) {
  S.paused = paused;
  if (!paused && S.held.length) { const held = S.held; S.held = []; append(held); $('log').scrollTop = $('log').scrollHeight; }
  updateNew();
}
$('t-pause').addEventListener('click', () => setPaused(!S.paused));
$('t-new').addEventListener('click', () => setPaused(false));

// ---- cancel --------------------------------------------------------------
$('cancel-btn').addEventListener('click', () => {
  const reps = S.status ? replicasOf(S.status).length : 0;
  $('cancel-text').textContent = `${S.app} and its ${reps} replica${reps === 1 ? '' : 's'} will be stopped: ` +
    'SIGTERM, then SIGKILL after the grace period.';
  $('cancel-confirm').disabled = false;
  $('cancel-dialog').showModal();
});
$('cancel-keep').addEventListener('click', () => $('cancel-dialog').close());
$('cancel-confirm').addEventListener('click', async () => {
  if (S.cancelling) return;
  S.cancelling = true;
  $('cancel-confirm').disabled = true;
  try {
    await api('/api/cancel', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Torchxd-Csrf': S.session.csrf },
      body: JSON.stringify({ app_handle: S.app }),
    });
    $('cancel-dialog').close();
  } catch (e) {
    $('cancel-text').textContent = 'Cancel failed: ' + e.message;
  } finally {
    S.cancelling = false;
  }
});

// ---- start ---------------------------------------------------------------
(async function main() {
  try {
    S.session = await api('/api/session');
    $('host').textContent = S.session.host || '';
    document.title = 'torchxd on ' + (S.session.host || '');
    $('who').textContent = S.session.user + (S.session.admin ? ' (admin)' : '') + (S.session.read_only ? ' · read-only' : '');
  } catch (e) {
    banner('not signed in: ' + e.message);
  }
  show();
})();
