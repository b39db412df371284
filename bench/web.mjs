// The web page's targets (bench/README.md, scenario "web"), in Debian's
// headless Chromium with the browser tests' harness:
//   load:    a daemon with 1,000 apps; page open until the 1,000 rows are shown,
//            against a static file with the same 1,000 rows (same browser, same run)
//   latency: a replica prints its clock every 100 ms; the page notes when each
//            line appears: the difference is the line's way through shim, log
//            store, event stream and page
//   idle:    daemon CPU over 10 s with the page open (list of 1,000 apps and a
//            tail) and without it
// Prints one line per figure; writes them as JSON to argv[2].
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

import { join } from 'node:path';

import { BIN, Daemon, launch, skipReason } from '../tests/browser/harness.mjs';

const why = await skipReason();
if (why) {
  console.log(`web: skipped (${why})`);
  process.exit(0);
}
const out = process.argv[2];
const results = {};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const ticks = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(f[11]) + Number(f[12]);
};

const daemon = await new Daemon(['--cache-size', '2000']).start();
const browser = await launch();
try {
  // 1,000 finished apps, submitted 8 at a time.
  const run = promisify(execFile);
  const env = { ...process.env, TORCHX_NO_AUTOSTART: '1' };
  for (let i = 0; i < 1000; i += 8) {
    await Promise.all(Array.from({ length: Math.min(8, 1000 - i) }, (_, k) =>
      run(join(BIN, 'torchx'), ['--socket', daemon.socket, 'run', '-d', 'utils.echo', '--msg', `m${i + k}`], { env })));
  }
  await sleep(1000);

  // load
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const login = await context.newPage();
  await login.goto(daemon.url);  // sets the cookie
  await login.close();
  const rows = Array.from({ length: 1000 }, (_, i) => `<tr><td><a href="#">echo-${i}</a></td><td>SUCCEEDED</td><td>root</td><td>default</td><td>local_cwd</td><td>1m</td><td>0s</td></tr>`).join('');
  const html = `<!doctype html><html><head><meta charset="utf-8"><title>static</title></head><body><table id="app-table"><tbody>${rows}</tbody></table></body></html>`;
  const server = createServer((req, res) => { res.writeHead(200, { 'Content-Type': 'text/html' }); res.end(html); });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const staticUrl = `http://127.0.0.1:${server.address().port}/`;
  const shown = async (url) => {
    const page = await context.newPage();
    const t0 = performance.now();
    await page.goto(url, { waitUntil: 'commit' });
    await page.waitForFunction(() => document.querySelectorAll('#app-table tbody tr').length >= 1000, null, { timeout: 30000, polling: 'raf' });
    const ms = performance.now() - t0;
    const fcp = await page.evaluate(() => performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null);
    await page.close();
    return { ms, fcp };
  };
  const page = [], base = [], fcp = [];
  for (let i = 0; i < 6; i++) {
    const p = await shown(daemon.origin + '/');
    const b = await shown(staticUrl);
    if (i === 0) continue;  // warm-up
    page.push(p.ms); fcp.push(p.fcp); base.push(b.ms);
  }
  server.close();
  results.load = { page_ms: median(page), first_contentful_paint_ms: median(fcp), static_ms: median(base), target_ms: 300 };
  console.log(`web load: 1,000 apps shown in ${median(page).toFixed(0)} ms (first paint ${median(fcp).toFixed(0)} ms); ` +
    `static file with the same rows ${median(base).toFixed(0)} ms; target <= 300 ms: ${median(page) <= 300 ? 'met' : 'NOT met'}`);

  // latency
  const h = daemon.run('utils.sh', 'sh', '-c', 'for i in $(seq 1 80); do echo "t $(date +%s%3N)"; sleep 0.1; done');
  const tail = await context.newPage();
  await tail.goto(daemon.origin + '/apps/' + encodeURIComponent(h) + '?role=sh&replica=0');
  await tail.evaluate(() => {
    window.__lat = [];
    new MutationObserver((muts) => {
      const now = Date.now();
      for (const m of muts) for (const n of m.addedNodes) {
        const t = /^t (\d+)/.exec(n.textContent || '');
        if (t) window.__lat.push(now - Number(t[1]));
      }
    }).observe(document.getElementById('log'), { childList: true });
  });
  await tail.waitForFunction(() => window.__lat.length >= 60, null, { timeout: 30000 });
  const lat = await tail.evaluate(() => window.__lat.slice(5));
  results.latency = { median_ms: median(lat), p95_ms: pct(lat, 0.95), max_ms: Math.max(...lat), target_ms: 50 };
  console.log(`web latency: a log line reaches the page in ${median(lat)} ms (p95 ${pct(lat, 0.95)}, max ${Math.max(...lat)}); target <= 50 ms: ${median(lat) <= 50 ? 'met' : 'NOT met'}`);

  // idle
  await sleep(9000);  // the app ends; nothing changes from here on
  const hz = 100;
  const t0 = ticks(daemon.proc.pid);
  await sleep(10000);
  const open = ticks(daemon.proc.pid) - t0;
  await context.close();
  await sleep(1000);
  const t1 = ticks(daemon.proc.pid);
  await sleep(10000);
  const closed = ticks(daemon.proc.pid) - t1;
  const share = (open / hz / 10) * 100;
  results.idle = { ticks_open_10s: open, ticks_closed_10s: closed, cpu_percent_open: share, target_percent: 1 };
  console.log(`web idle: the daemon used ${open} CPU ticks in 10 s with a page open (list of 1,000 apps + a tail) = ${share.toFixed(2)}% ` +
    `(${closed} ticks without); target <= 1%: ${share <= 1 ? 'met' : 'NOT met'}`);
} finally {
  await browser.close();
  await daemon.stop();
}
if (out) writeFileSync(out, JSON.stringify(results, null, 2) + '\n');
