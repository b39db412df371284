// Shared by the browser tests: one real torchxd per test file (temp state
// dir, the web page on 127.0.0.1:<free port>), the real torchx, and Debian's
// headless Chromium driven by playwright-core. Every wait is bounded.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export const BIN = process.env.TORCHXD_BIN_DIR || join(import.meta.dirname, '../../build/bin');
export const SHOTS = process.env.TORCHXD_SCREENSHOTS || join(BIN, '../browser-screenshots');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

// Why these tests cannot run here, or null (said once, for ctest to see).
export async function skipReason() {
  const why = await whySkip();
  if (why) console.log(`browser tests skipped: ${why}`);
  return why;
}

async function whySkip() {
  if (Number(process.versions.node.split('.')[0]) < 20) return `Node.js ${process.versions.node} (playwright-core needs 20 or newer)`;
  if (!existsSync(CHROMIUM)) return `no ${CHROMIUM} (apt-get install chromium)`;
  try {
    await import('playwright-core');
  } catch {
    return 'playwright-core is not installed (npm ci --prefix tests/browser)';
  }
  if (!existsSync(join(BIN, 'torchxd'))) return `no torchxd in ${BIN}`;
  return null;
}

export class Daemon {
  constructor(extraArgs = []) {
    this.dir = mkdtempSync(join(tmpdir(), 'torchxd-browser-'));
    this.socket = join(this.dir, 'torchxd.sock');
    this.extraArgs = extraArgs;
  }

  async start() {
    this.proc = spawn(join(BIN, 'torchxd'), ['--socket', this.socket, '--state-dir', join(this.dir, 'state'),
      '--grace-period', '0.5', '--ui-listen', `127.0.0.1:${this.port || 0}`, ...this.extraArgs],
    { stdio: ['ignore', 'ignore', 'pipe'] });
    this.log = '';
    this.proc.stderr.on('data', (d) => { this.log += d; });
    for (let i = 0; i < 500; i++) {
      if (existsSync(this.socket)) {
        try {
          const ui = JSON.parse(this.torchx('ui', '--json'));
          this.port = Number(new URL(ui.url).port);
          this.origin = `http://127.0.0.1:${this.port}`;
          this.url = ui.url;
          this.token = ui.token;
          return this;
        } catch { /* not answering yet */ }
      }
      await sleep(20);
    }
    throw new Error('torchxd did not start: ' + this.log);
  }

  torchx(...args) {
    return execFileSync(join(BIN, 'torchx'), ['--socket', this.socket, ...args],
      { encoding: 'utf8', env: { ...process.env, TORCHX_NO_AUTOSTART: '1' }, timeout: 30000, stdio: ['ignore', 'pipe', 'pipe'] });
  }

  // Submits a detached app and returns its handle.
  run(...args) {
    const out = this.torchx('run', '-d', ...args).trim().split('\n');
    return out[out.length - 1];
  }

  async kill(signal = 'SIGTERM') {
    if (!this.proc || this.proc.exitCode !== null) return;
    const exited = new Promise((resolve) => this.proc.once('exit', resolve));
    this.proc.kill(signal);
    // Unref'd: a pending timer would keep node (and the test file) alive for its 15 s.
    await Promise.race([exited, sleep(15000, undefined, { ref: false })]);
  }

  async stop() {
    try { this.torchx('daemon', 'stop', '--cancel-all'); } catch { /* already gone */ }
    await this.kill('SIGTERM');
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export async function launch() {
  const { chromium } = await import('playwright-core');
  // As root, Chromium needs --no-sandbox; the rest keep it off the (closed) network.
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
    timeout: 30000,
  });
}

// A page that records console errors and every request's origin.
export async function openPage(browser, daemon, viewport = { width: 1280, height: 800 }) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  page.setDefaultTimeout(10000);
  page.errors = [];
  page.origins = new Set();
  page.on('console', (m) => { if (m.type() === 'error') page.errors.push(m.text()); });
  page.on('pageerror', (e) => page.errors.push(String(e)));
  page.on('request', (r) => page.origins.add(new URL(r.url()).origin));
  await page.goto(daemon.url);
  return page;
}

export async function screenshot(page, name) {
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, name + '.png'), fullPage: false });
}

export async function until(fn, what, timeoutMs = 10000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error('timed out waiting for ' + what);
    await sleep(50);
  }
}
