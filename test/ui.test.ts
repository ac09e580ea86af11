/**
 * The web interface in a real browser: Debian's chromium driven by playwright-core against `voxd serve --start-ui`
 * (free ports, built-in models, the transport under test). Each view's flow runs as a person would click it; the
 * microphone is Chromium's fake capture device playing the JFK clip. Every request the page makes is recorded and
 * must go to the UI's or the API's own address. Screenshots of every view (desktop and 360 px, light and dark)
 * land in dist/ui-screenshots/.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type BrowserContext, type Download, type Page } from 'playwright-core';
import { ROOT, SHARED, SILERO_V6 } from './helpers/paths.js';
import { cliEnv, freePort, pollUntil, spawnCli, waitHealthy, type CliProcess } from './helpers/process.js';
import { transportUnderTest } from './helpers/transport.js';

const SCREENSHOTS = path.join(ROOT, 'dist', 'ui-screenshots');
const DRUMS = path.join(SHARED, 'audio', 'music', 'loop_amen.flac');
/** "had he married a more amiable woman he might have been made still more respectable than he was": a clip the
 * built-in recognizer reads well (6 s; its JFK transcript is too poor to look for words in). */
const SPEECH = path.join(SHARED, 'audio', 'speech', 'librivox-0920.wav');
const SPOKEN_WORDS = /amiable|respectable/i;
const WAIT_MS = 30_000;

/** Chromium from the system (scripts/system-deps.mjs installs Debian's package for `npm test`). */
function chromiumPath(): string {
  for (const name of ['chromium', 'chromium-browser']) {
    try {
      return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim();
    } catch {
      // try the next name
    }
  }
  throw new Error('chromium is not installed: `npm test` installs it (apt-get install chromium) when run as root on Debian');
}

interface Served {
  proc: CliProcess;
  api: string;
  ui: string;
}

/**
 * `voxd serve --start-ui` on free ports, its API open only to the UI's origin (CORS and the WebSocket origin check
 * both apply); resolves once both answer.
 */
async function serveWithUi(scope: { after(fn: () => Promise<void>): void }, scratch: string): Promise<Served> {
  const [apiPort, uiPort] = [await freePort(), await freePort()];
  const api = `http://127.0.0.1:${apiPort}`;
  const ui = `http://127.0.0.1:${uiPort}`;
  const args = ['serve', '--host', '127.0.0.1', '--port', String(apiPort), '--start-ui', '--ui-host', '127.0.0.1', '--ui-port', String(uiPort)];
  args.push('--allowed-origins', ui, '--transport', transportUnderTest(), '--log-dir', path.join(scratch, 'logs'), '--vad-model', SILERO_V6);
  const proc = spawnCli(scope, args, cliEnv(scratch));
  await waitHealthy(api, proc);
  return { proc, api, ui };
}

/** Four screenshots of what the page shows now: desktop and 360 px wide, light and dark. */
async function screenshots(page: Page, name: string): Promise<void> {
  const original = page.viewportSize()!;
  for (const [width, size] of [
    [1280, 'desktop'],
    [360, 'mobile'],
  ] as const) {
    for (const scheme of ['light', 'dark'] as const) {
      await page.setViewportSize({ width, height: width === 360 ? 740 : 800 });
      await page.emulateMedia({ colorScheme: scheme });
      await page.waitForTimeout(100); // waveforms redraw on resize
      await page.screenshot({ path: path.join(SCREENSHOTS, `${name}-${size}-${scheme}.png`), fullPage: true });
    }
  }
  await page.setViewportSize(original);
  await page.emulateMedia({ colorScheme: 'light' });
}

async function downloaded(download: Download): Promise<Buffer> {
  const file = await download.path();
  return fs.readFileSync(file);
}

describe('web interface in chromium', { timeout: 180_000 }, () => {
  let scratch: string;
  let served: Served;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const requested: string[] = [];
  const cleanups: (() => Promise<void>)[] = [];

  before(async () => {
    scratch = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-ui-test-'));
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    served = await serveWithUi({ after: (fn) => cleanups.push(fn) }, scratch);
    browser = await chromium.launch({
      executablePath: chromiumPath(),
      args: [
        '--use-fake-ui-for-media-stream',
        '--use-fake-device-for-media-stream',
        `--use-file-for-fake-audio-capture=${SPEECH}`,
        '--autoplay-policy=no-user-gesture-required',
      ],
    });
    context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 800 } });
    page = await context.newPage();
    page.on('request', (request) => requested.push(request.url()));
    page.on('websocket', (socket) => requested.push(socket.url()));
  });

  after(async () => {
    await browser?.close();
    for (const cleanup of cleanups) await cleanup();
    await fsp.rm(scratch, { recursive: true, force: true });
  });

  it('speaks: streamed playback, a downloadable file, and a history that survives a reload', async () => {
    await page.goto(`${served.ui}/#speak`);
    await page.locator('#speak-voice option').first().waitFor({ state: 'attached', timeout: WAIT_MS });
    assert.match(await page.locator('#speak-count').innerText(), /\/ 4,096 characters/);
    const [speech] = await Promise.all([page.waitForRequest(/\/v1\/audio\/speech$/), page.getByRole('button', { name: 'Generate' }).click()]);
    assert.equal((speech.postDataJSON() as { stream: boolean }).stream, true, 'mp3 plays while it is synthesised');
    const download = page.getByRole('link', { name: /^Download mp3/ });
    await download.waitFor({ timeout: WAIT_MS });
    const audio = await page.locator('audio[aria-label="Generated speech"]').evaluate(async (element: HTMLAudioElement) => {
      const bytes = new Uint8Array(await (await fetch(element.src)).arrayBuffer());
      return { size: bytes.length, head: [...bytes.subarray(0, 3)] };
    });
    assert.ok(audio.size > 2000, `the player's source holds ${audio.size} bytes`);
    assert.ok(String.fromCharCode(...audio.head) === 'ID3' || audio.head[0] === 0xff, `MP3 bytes: ${audio.head.join(',')}`);
    const [file] = await Promise.all([page.waitForEvent('download'), download.click()]);
    assert.match(file.suggestedFilename(), /^voxd-tts-1-\w+-\d{8}-\d{6}\.mp3$/);
    assert.equal((await downloaded(file)).length, audio.size);
    await page.locator('canvas.waveform').first().waitFor({ timeout: WAIT_MS });
    await screenshots(page, 'speak');

    await page.reload();
    await page.locator('.history li').first().waitFor({ timeout: WAIT_MS });
    assert.match(await page.locator('.history li').first().innerText(), /Hello from voxd/);
  });

  it('shows an API error next to the control that caused it (an unknown voice)', async () => {
    await page.goto(`${served.ui}/#speak`);
    await page.locator('#speak-voice option').first().waitFor({ state: 'attached', timeout: WAIT_MS });
    await page.locator('#speak-voice').evaluate((select: HTMLSelectElement) => select.add(new Option('nobody', 'nobody')));
    await page.locator('#speak-voice').selectOption('nobody');
    await page.getByRole('button', { name: 'Generate' }).click();
    const error = page.locator('#speak-error');
    await error.waitFor({ state: 'visible', timeout: WAIT_MS });
    assert.match(await error.innerText(), /unknown voice 'nobody'.*\(invalid_request\)/);
    assert.equal(await error.getAttribute('role'), 'alert');
    await screenshots(page, 'speak-error');
  });

  it('transcribes an upload, seeks from a segment and exports txt, srt, vtt and json', async () => {
    await page.goto(`${served.ui}/#transcribe`);
    await page.locator('input[type=file]').setInputFiles(SPEECH);
    await page.getByRole('button', { name: 'Transcribe', exact: true }).click();
    const segment = page.locator('.segment').first();
    await segment.waitFor({ timeout: WAIT_MS });
    assert.match(await page.locator('.segments').innerText(), SPOKEN_WORDS);
    const last = page.locator('.segment').last();
    await last.click();
    const time = await page.locator('audio[aria-label="Uploaded audio"]').evaluate((element: HTMLAudioElement) => element.currentTime);
    assert.ok(time > 0, `clicking the last segment seeks the audio (at ${time} s)`);

    const exports: Record<string, (text: string) => void> = {
      txt: (text) => {
        assert.match(text, SPOKEN_WORDS);
        assert.doesNotMatch(text, /-->/);
      },
      srt: (text) => assert.match(text, /^1\r?\n\d\d:\d\d:\d\d,\d{3} --> \d\d:\d\d:\d\d,\d{3}\r?\n/),
      vtt: (text) => assert.match(text, /^WEBVTT\s[\s\S]*\d\d:\d\d\.\d{3} --> /),
      json: (text) => assert.ok(Array.isArray((JSON.parse(text) as { segments: unknown[] }).segments)),
    };
    for (const [extension, check] of Object.entries(exports)) {
      const [file] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: `Export .${extension}` }).click()]);
      assert.ok(file.suggestedFilename().endsWith(`.${extension}`), file.suggestedFilename());
      check((await downloaded(file)).toString('utf8'));
    }
    await screenshots(page, 'transcribe');
  });

  it('transcribes the microphone live over /v1/realtime', async () => {
    await page.goto(`${served.ui}/#live`);
    const sockets: string[] = [];
    page.on('websocket', (socket) => sockets.push(socket.url()));
    await page.getByRole('button', { name: /Start live transcription/ }).click();
    await page.getByRole('button', { name: /Stop/ }).waitFor({ timeout: WAIT_MS });
    // the fake device loops the clip from wherever it was when the page opened it: a whole reading comes round
    await page.locator('.turns li.done').filter({ hasText: SPOKEN_WORDS }).first().waitFor({ timeout: 45_000 });
    assert.ok(
      sockets.some((url) => url.startsWith(`${served.api.replace('http', 'ws')}/v1/realtime`)),
      sockets.join(' '),
    );
    const level = Number(await page.getByRole('meter', { name: 'Microphone level' }).getAttribute('aria-valuenow'));
    assert.ok(level >= 0);
    await screenshots(page, 'live');
    await page.getByRole('button', { name: /Stop/ }).click();
  });

  it('separates a mixture into target and residual, each playable and downloadable as WAV', async () => {
    await page.goto(`${served.ui}/#separate`);
    await page.locator('input[type=file]').setInputFiles(DRUMS);
    await page.locator('#separate-description').fill('drums');
    await page.getByRole('button', { name: 'Separate' }).click();
    await page.getByRole('link', { name: 'Download residual WAV' }).waitFor({ timeout: WAIT_MS });
    assert.equal(await page.locator('audio').count(), 3, 'input, target and residual players');
    for (const name of ['Download target WAV', 'Download residual WAV']) {
      const [file] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name }).click()]);
      const bytes = await downloaded(file);
      assert.equal(bytes.subarray(0, 4).toString('latin1'), 'RIFF', name);
      assert.equal(bytes.subarray(8, 12).toString('latin1'), 'WAVE', name);
    }
    await page.locator('canvas.waveform').nth(2).waitFor({ timeout: WAIT_MS });
    await screenshots(page, 'separate');
  });

  it('loads and unloads models, the list following the server', async () => {
    await page.goto(`${served.ui}/#models`);
    const row = page.locator('tr[data-model="spectral"]');
    await row.waitFor({ timeout: WAIT_MS });
    const badge = row.locator('.badge');
    await badge.filter({ hasText: /^loaded$/ }).waitFor({ timeout: WAIT_MS }); // the separation loaded it
    await row.getByRole('button', { name: 'Unload spectral' }).click();
    await badge.filter({ hasText: /^not loaded$/ }).waitFor({ timeout: WAIT_MS });
    const listed = (await (await fetch(`${served.api}/v1/models`)).json()) as { data: { id: string }[] };
    assert.ok(!listed.data.some((model) => model.id === 'spectral'), 'the server unloaded it');
    await row.getByRole('button', { name: 'Load spectral' }).click();
    await badge.filter({ hasText: /^loaded$/ }).waitFor({ timeout: WAIT_MS });

    await page.locator('#model-id').fill('/nonexistent/model.bin');
    await page.getByRole('button', { name: 'Load', exact: true }).click();
    const error = page.locator('#model-form-error');
    await error.waitFor({ state: 'visible', timeout: WAIT_MS });
    assert.match(await error.innerText(), /\(\w+\)$/, 'the envelope code is shown');
    await screenshots(page, 'models');
  });

  it('sent no request to any host but the UI and the API', () => {
    const own = [served.ui, served.api, served.api.replace('http', 'ws')];
    const foreign = requested.filter((url) => !url.startsWith('blob:') && !url.startsWith('data:') && !own.some((base) => url.startsWith(base + '/')));
    assert.deepEqual(foreign, []);
    assert.ok(requested.length > 10);
  });

  it('`voxd ui --api-url` drives a server on another port (CORS *), and says so when that server goes away', async (t) => {
    const [apiPort, uiPort] = [await freePort(), await freePort()];
    const api = `http://127.0.0.1:${apiPort}`;
    const common = ['--host', '127.0.0.1', '--transport', transportUnderTest(), '--log-dir', path.join(scratch, 'logs-standalone')];
    const server = spawnCli(t, ['serve', '--port', String(apiPort), ...common], cliEnv(scratch));
    await waitHealthy(api, server);
    const standalone = spawnCli(t, ['ui', '--port', String(uiPort), '--api-url', api, ...common], cliEnv(scratch));
    const ui = `http://127.0.0.1:${uiPort}`;
    await pollUntil(ui, '/', (status) => status === 200, 15_000, standalone);
    await page.goto(`${ui}/#models`);
    await page.locator('tr[data-model="sphinx"]').waitFor({ timeout: WAIT_MS });
    await page.locator('.server .dot.ready').waitFor({ timeout: WAIT_MS });
    assert.match(await page.locator('.server').innerText(), new RegExp(`127\\.0\\.0\\.1:${apiPort}\\b`));

    server.child.kill('SIGTERM');
    await server.waitExit(10_000);
    const banner = page.locator('.banner.error');
    await banner.waitFor({ timeout: WAIT_MS });
    assert.match(await banner.innerText(), new RegExp(`Cannot reach the voxd server at ${api.replace(/\./g, '\\.')}`));
    await screenshots(page, 'server-down');
  });
});
