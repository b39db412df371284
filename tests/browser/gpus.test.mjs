// The GPUs on the page, read from a fake NVML (tests/daemon/fake_nvml.cc):
// a tile per GPU with its holder, readings, sparklines and health; an idle
// holder flagged; the 24-hour timeline whose bars open their app; an app's
// page charting its GPUs. Screenshots at 1280x800 and 390x844.
import assert from 'node:assert/strict';
import { renameSync, writeFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { Daemon, launch, openPage, screenshot, skipReason, until } from './harness.mjs';

const skip = (await skipReason()) || (process.env.FAKE_NVML ? null : 'no FAKE_NVML (the fake libnvidia-ml)');
if (skip && process.env.FAKE_NVML === undefined) console.log(`browser tests skipped: ${skip}`);

function gpu(i, extra) {
  return { uuid: `GPU-0000000${i}`, pci_bus_id: `00000000:0${i}:00.0`, memory_total_mb: 81920, memory_used_mb: 0,
    util_gpu: 0, util_mem: 0, temperature_c: 34 + i, power_mw: 70000, power_limit_mw: 400000, sm_clock_mhz: 1410,
    ecc_uncorrected: 0, ecc_corrected: 0, ...extra };
}

describe('GPUs on the page', { skip: skip || false, timeout: 120000 }, () => {
  let daemon, browser, nvml;
  const write = (gpus) => {
    writeFileSync(nvml + '.tmp', JSON.stringify({ gpus }));
    renameSync(nvml + '.tmp', nvml);
  };
  const gpuApp = (name, gpus, seconds) => {
    const file = `${daemon.dir}/${name}.json`;
    writeFileSync(file, JSON.stringify({ name, roles: [{ name: 'w', entrypoint: 'sleep', args: [String(seconds)],
      resource: { cpu: 1, gpu: gpus, memMB: 1024 } }] }));
    return daemon.run(file);
  };
  const heldBy = (handle) => JSON.parse(daemon.torchx('status', '--json', handle)).roles[0].replicas[0].gpus.map((g) => g.index);

  before(async () => {
    daemon = new Daemon(['--nvml-library', process.env.FAKE_NVML, '--gpu-sample-period', '0.2', '--gpu-idle-after', '1']);
    nvml = `${daemon.dir}/nvml.json`;
    process.env.TORCHXD_FAKE_NVML = nvml;
    write([gpu(0), gpu(1), gpu(2), gpu(3)]);
    await daemon.start();
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    await daemon?.stop();
    delete process.env.TORCHXD_FAKE_NVML;
  });

  test('tiles: holder, readings and sparklines; an idle holder flagged; a lost GPU unhealthy; the timeline opens the app', async () => {
    // A short job that used two GPUs, then one busy and one idle holder.
    const done = gpuApp('early', 2, 1);
    await until(() => /SUCCEEDED/.test(daemon.torchx('status', done)), 'the first job to end', 15000);
    const busy = gpuApp('busy', 1, 600);
    await until(() => heldBy(busy).length === 1, 'the busy app to hold a GPU');
    const idle = gpuApp('idle', 1, 600);
    await until(() => heldBy(idle).length === 1, 'the idle app to hold a GPU');
    const [b] = heldBy(busy), [i] = heldBy(idle);
    const lost = [0, 1, 2, 3].find((g) => g !== b && g !== i);
    const gpus = [gpu(0), gpu(1), gpu(2), gpu(3)];
    gpus[b] = gpu(b, { util_gpu: 87, util_mem: 45, memory_used_mb: 30720, power_mw: 312000, temperature_c: 71 });
    gpus[lost] = gpu(lost, { ecc_uncorrected: 3 });
    write(gpus);

    const page = await openPage(browser, daemon);
    const tiles = page.locator('#gpu-tiles .gpu-tile');
    await until(async () => (await tiles.count()) === 4, 'four tiles');
    const tile = (g) => page.locator(`#gpu-tiles .gpu-tile[data-gpu="${g}"]`);
    await tile(b).locator('.value.util', { hasText: 'util 87%' }).waitFor();
    await tile(b).locator('.holder', { hasText: busy.split('/').pop() }).waitFor();
    assert.match(await tile(b).locator('.value.mem').textContent(), /30\.0 GiB \/ 80\.0 GiB/);
    await tile(i).locator('.idle', { hasText: /idle for \d+ s/ }).waitFor({ timeout: 15000 });
    await tile(lost).locator('.badge', { hasText: 'unhealthy' }).waitFor();
    assert.match(await tile(lost).locator('.reason').textContent(), /3 uncorrected ECC errors/);
    // The sparklines draw the readings of the last minutes (one refresh every 10 s).
    await until(async () => (await tile(b).locator('.spark.util path').count()) === 1, 'the util sparkline', 15000);
    // The timeline: a bar per GPU each app held, coloured by user; the early job's on two GPUs.
    const bars = (h) => page.locator(`#gpu-timeline a.bar[data-handle="${h}"]`);
    await until(async () => (await bars(done).count()) === 2, 'the early job on two lanes', 15000);
    assert.equal(await bars(busy).count(), 1);
    await page.locator('#gpu-timeline .legend-item', { hasText: 'root' }).first().waitFor();
    assert.deepEqual(page.errors, []);
    await screenshot(page, 'gpus-1280x800');
    const phone = await openPage(browser, daemon, { width: 390, height: 844 });
    await phone.locator(`#gpu-tiles .gpu-tile[data-gpu="${b}"] .value.util`, { hasText: 'util 87%' }).waitFor();
    await until(async () => (await phone.locator('#gpu-timeline a.bar').count()) >= 4, 'the timeline on the phone', 15000);
    await screenshot(phone, 'gpus-390x844');
    assert.deepEqual(phone.errors, []);
    await phone.context().close();

    // A click on the busy app's bar opens it: its page charts its GPU's use and memory.
    await bars(busy).first().click();
    await page.waitForURL((u) => u.pathname === '/apps/' + encodeURIComponent(busy));
    const charts = page.locator('#app-gpus figure.chart');
    await until(async () => (await charts.count()) === 2, 'two charts on the app page', 15000);
    await page.locator('#app-gpus', { hasText: `1 GPU (${b})` }).waitFor();
    await until(async () => (await page.locator('#app-gpus figure.chart path.chart-line').count()) === 2, 'a line in each chart', 15000);
    assert.deepEqual(page.errors, []);
    await screenshot(page, 'gpus-app-1280x800');
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForTimeout(500);  // the charts redraw at the new width
    await screenshot(page, 'gpus-app-390x844');
    await page.context().close();
    daemon.torchx('cancel', busy);
    daemon.torchx('cancel', idle);
  });

  test("a waiting app's page shows why it waits and its events instead of an empty log; they follow it as it starts", async () => {
    const holder = gpuApp('holder', 3, 600);  // with GPU 2 out of service, the box is full
    await until(() => heldBy(holder).length === 3, 'the holder to run');
    const waiting = gpuApp('waiting', 1, 600);
    const page = await openPage(browser, daemon);
    await page.goto(daemon.origin + '/apps/' + encodeURIComponent(waiting));
    await page.locator('#event-list li[data-type="queued"]', { hasText: '1st in queue default' }).waitFor();
    await page.locator('#app-msg', { hasText: 'waiting for 1 GPU' }).waitFor();
    assert.equal(await page.locator('#tail').isHidden(), true, 'no empty log box for an app that never started');
    await screenshot(page, 'pending-1280x800');
    daemon.torchx('cancel', holder);
    await page.locator('#event-list li[data-type="started"]').waitFor({ timeout: 15000 });
    await page.locator('#tail').waitFor({ state: 'visible' });
    const types = await page.locator('#event-list li').evaluateAll((lis) => lis.map((li) => li.dataset.type));
    assert.deepEqual(types.slice(0, 4), ['submitted', 'queued', 'admitted', 'started']);
    assert.deepEqual(page.errors, []);
    await page.context().close();
    daemon.torchx('cancel', waiting);
  });
});
