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
import { chromium, type Browser, type BrowserContext, type Download, type Locator, type Page } from 'playwright-core';
import { HubDouble } from '../helpers/hub-double.js';
import { parakeetTestModel } from '../helpers/parakeet.js';
import { audioLmTestModel } from '../helpers/audio-lm.js';
import { makeTiny } from '../helpers/ggml-tts.js';
import { kokoroTestModel } from '../helpers/kokoro.js';
import { JFK_WAV, ROOT, SHARED, SILERO_V6 } from '../helpers/paths.js';
import { cliEnv, freePort, pollUntil, spawnCli, waitHealthy, type CliProcess } from '../helpers/process.js';
import { transportUnderTest } from '../helpers/transport.js';
import { readWavMono, wavBytes } from '../helpers/wav.js';

const SCREENSHOTS = path.join(ROOT, 'dist', 'ui-screenshots');
const DRUMS = path.join(SHARED, 'audio', 'music', 'loop_amen.flac');
/** "had he married a more amiable woman he might have been made still more respectable than he was": a clip the
 * built-in recognizer reads well (6 s; its JFK transcript is too poor to look for words in). */
const SPEECH = path.join(SHARED, 'audio', 'speech', 'librivox-0920.wav');
const SPOKEN_WORDS = /amiable|respectable/i;
const WAIT_MS = 30_000;
/** The microphone meter's value (RMS, percent of full scale) that SPEECH's words reach (5 to 15) and its pauses (0 to 1) do not. */
const SPEECH_LEVEL = 5;

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
async function serveWithUi(scope: { after(fn: () => Promise<void>): void }, scratch: string, env: NodeJS.ProcessEnv = {}): Promise<Served> {
  const [apiPort, uiPort] = [await freePort(), await freePort()];
  const api = `http://127.0.0.1:${apiPort}`;
  const ui = `http://127.0.0.1:${uiPort}`;
  const args = ['serve', '--host', '127.0.0.1', '--port', String(apiPort), '--start-ui', '--ui-host', '127.0.0.1', '--ui-port', String(uiPort)];
  args.push('--allowed-origins', ui, '--transport', transportUnderTest(), '--log-dir', path.join(scratch, 'logs'), '--vad-model', SILERO_V6);
  const proc = spawnCli(scope, args, cliEnv(scratch, env));
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

/** Shows a view as a person would: its tab. */
async function showView(page: Page, name: RegExp): Promise<void> {
  await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name }).click();
}

/** The text of the option a <select> offers for `value`; undefined when it offers none. */
async function optionText(page: Page, select: string, value: string): Promise<string | undefined> {
  const offered = await page.locator(`${select} option`).evaluateAll((all: HTMLOptionElement[]) => all.map((option) => [option.value, option.text]));
  return offered.find(([offeredValue]) => offeredValue === value)?.[1];
}

/** Loads a model as a person would, by its path in the Models view (which names its engine); its row there. */
async function loadInModelsView(page: Page, ui: string, model: string): Promise<Locator> {
  await page.goto(`${ui}/#models`);
  await page.locator('#model-id').fill(model);
  await page.getByRole('button', { name: 'Load', exact: true }).click();
  const row = page.locator(`tr[data-model="${model}"]`);
  await row
    .locator('.badge')
    .filter({ hasText: /^loaded$/ })
    .waitFor({ timeout: WAIT_MS });
  return row;
}

/** The LibriVox reader's voice, in a clip of its own (5.3 s) that the dialogue below does not contain. */
const READER_CLIP = path.join(SHARED, 'audio', 'speech', 'librivox-0890.wav');

/** Two voices taking turns, 0.5 s apart: the reader (7.1 s), JFK (11 s), the reader again (6 s); all 16 kHz mono. */
function writeDialogue(file: string): void {
  const parts = ['librivox-0870.wav', 'jfk.wav', 'librivox-0920.wav'].map((name) => readWavMono(path.join(SHARED, 'audio', 'speech', name)).samples);
  const pause = new Float32Array(8000);
  const turns = parts.flatMap((part, i) => (i === 0 ? [part] : [pause, part]));
  const samples = new Float32Array(turns.reduce((length, turn) => length + turn.length, 0));
  turns.reduce((offset, turn) => (samples.set(turn, offset), offset + turn.length), 0);
  fs.writeFileSync(file, wavBytes(samples, 16000));
}

/** The catalog's `silero-vad`: the file the hub double serves for it. */
const CATALOG_VAD = { repo: 'ggml-org/whisper-vad', file: 'ggml-silero-v6.2.0.bin' };

/** A word wider than a phone's screen, as URLs and compound words are. */
const LONG_WORD = 'Donaudampfschifffahrtsgesellschaftskapitänswitwenrentenversicherung';

/** A file that is not audio at all. */
const NOT_AUDIO = { name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('not audio at all\n') };

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
  let hub: HubDouble;
  const requested: string[] = [];
  const cleanups: (() => Promise<void>)[] = [];

  before(async () => {
    scratch = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-ui-test-'));
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    // the hub is a double holding the catalog's VAD model, which a test downloads
    hub = await HubDouble.start({ chunkSize: 16 * 1024 });
    hub.addRepo(CATALOG_VAD.repo, { files: { [CATALOG_VAD.file]: SILERO_V6 } });
    cleanups.push(() => hub.close());
    served = await serveWithUi({ after: (fn) => cleanups.push(fn) }, scratch, { HF_ENDPOINT: hub.endpoint });
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
    /** The MP3 the player holds, checked against the one the download link saves. */
    const generated = async (): Promise<number> => {
      const audio = await page.locator('audio[aria-label="Generated speech"]').evaluate(async (element: HTMLAudioElement) => {
        const bytes = new Uint8Array(await (await fetch(element.src)).arrayBuffer());
        return { size: bytes.length, head: [...bytes.subarray(0, 3)] };
      });
      assert.ok(audio.size > 2000, `the player's source holds ${audio.size} bytes`);
      assert.ok(String.fromCharCode(...audio.head) === 'ID3' || audio.head[0] === 0xff, `MP3 bytes: ${audio.head.join(',')}`);
      const [file] = await Promise.all([page.waitForEvent('download'), download.click()]);
      assert.match(file.suggestedFilename(), /^voxd-tts-1-\w+-\d{8}-\d{6}\.mp3$/);
      assert.equal((await downloaded(file)).length, audio.size);
      return audio.size;
    };
    await download.waitFor({ timeout: WAIT_MS });
    const first = await generated();

    // a second streamed generation plays its own stream (the player used to keep the first file and never attach it)
    await page.evaluate(() => {
      const counted = window as unknown as { streamsAttached: number };
      const attach = MediaSource.prototype.addSourceBuffer;
      counted.streamsAttached = 0;
      MediaSource.prototype.addSourceBuffer = function (this: MediaSource, type: string) {
        counted.streamsAttached++;
        return attach.call(this, type);
      };
    });
    await page.locator('#speak-text').fill('A second request, streamed like the first one, with words of its own.');
    await page.getByRole('button', { name: 'Generate' }).click();
    await page.locator('.history li').first().filter({ hasText: 'A second request' }).waitFor({ timeout: WAIT_MS });
    assert.equal(await page.evaluate(() => (window as unknown as { streamsAttached: number }).streamsAttached), 1, 'the stream reached the player');
    assert.notEqual(await generated(), first, 'the second download is the second audio');
    await page.locator('#view-speak canvas.waveform').first().waitFor({ timeout: WAIT_MS });
    await screenshots(page, 'speak');

    await page.reload();
    await page.locator('.history li').first().waitFor({ timeout: WAIT_MS });
    assert.match(await page.locator('.history li').first().innerText(), /A second request/);
    assert.match(await page.locator('.history').innerText(), /Hello from voxd/);
  });

  it('speak: Stop ends a stream and says so; the voices come back with the API', async () => {
    await page.locator('#speak-voice option').first().waitFor({ state: 'attached', timeout: WAIT_MS });
    const text = page.locator('#speak-text');
    await text.fill('A longer text, so that there is time to stop it while it streams. '.repeat(30));
    await text.press('Control+Enter');
    await page.getByRole('button', { name: 'Stop' }).click();
    await page
      .locator('#view-speak .status')
      .filter({ hasText: /^Stopped$/ })
      .waitFor({ timeout: WAIT_MS });
    assert.equal(await page.locator('audio[aria-label="Generated speech"]').count(), 0, 'no half-played stream is left');

    // the API goes away: the voices are asked again, fail, and Generate has no voice to send
    await page.route(`${served.api}/**`, (route) => route.abort());
    await page.locator('.server .dot.down').waitFor({ timeout: WAIT_MS });
    const voicesError = page.locator('#speak-voice-error');
    await voicesError.filter({ hasText: /Cannot reach/ }).waitFor({ timeout: WAIT_MS });
    assert.equal(await page.locator('#speak-voice option').count(), 0);
    assert.ok(await page.getByRole('button', { name: 'Generate' }).isDisabled(), 'no voice, nothing to send');
    assert.ok(await voicesError.evaluate((note) => note.closest('.field') === null), 'the error sits under the row, not in the Voice field');
    await page.unroute(`${served.api}/**`);
    await page.locator('.server .dot.ready').waitFor({ timeout: WAIT_MS });
    await page.locator('#speak-voice option').first().waitFor({ state: 'attached', timeout: WAIT_MS });
    await voicesError.waitFor({ state: 'hidden' });
    assert.ok(await page.getByRole('button', { name: 'Generate' }).isEnabled());
  });

  it('shows an API error next to the control that caused it (an unknown voice)', async () => {
    await page.goto(`${served.ui}/#speak`);
    await page.locator('#speak-voice option').first().waitFor({ state: 'attached', timeout: WAIT_MS });
    await page.locator('#speak-text').fill('Hello from voxd.');
    await page.locator('#speak-voice').evaluate((select: HTMLSelectElement) => select.add(new Option('nobody', 'nobody')));
    await page.locator('#speak-voice').selectOption('nobody');
    await page.getByRole('button', { name: 'Generate' }).click();
    const error = page.locator('#speak-error');
    await error.waitFor({ state: 'visible', timeout: WAIT_MS });
    assert.match(await error.innerText(), /unknown voice 'nobody'/);
    assert.equal(await error.locator('.error-code').innerText(), 'code: invalid_request');
    assert.equal(await error.getAttribute('role'), 'alert');
    await screenshots(page, 'speak-error');
    // the page never removes an option it did not render, and a later test counts a model's voices
    await page.locator('#speak-voice option[value="nobody"]').evaluate((option) => option.remove());
  });

  it('transcribes an upload, seeks from a segment and exports txt, srt, vtt and json', async () => {
    await page.goto(`${served.ui}/#speak`);
    await page.locator('#speak-text').fill('Kept while another view is shown.');
    await showView(page, /^Transcribe/);
    const view = page.locator('#view-transcribe');
    const picker = view.locator('input[type=file]');
    await picker.setInputFiles(SPEECH);
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
    const asked: string[] = [];
    const onRequest = (request: { url(): string }): void => void (request.url().includes('/v1/audio/') && asked.push(request.url()));
    page.on('request', onRequest);
    for (const [extension, check] of Object.entries(exports)) {
      const [file] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: `Export .${extension}` }).click()]);
      assert.ok(file.suggestedFilename().endsWith(`.${extension}`), file.suggestedFilename());
      check((await downloaded(file)).toString('utf8'));
    }
    page.off('request', onRequest);
    assert.deepEqual(asked, [], 'exports come from the transcript the page holds, not from transcribing again');
    await screenshots(page, 'transcribe');

    // every view keeps what it holds while another is shown
    await showView(page, /^Speak/);
    assert.equal(await page.locator('#speak-text').inputValue(), 'Kept while another view is shown.');
    await showView(page, /^Transcribe/);
    assert.match(await view.locator('.segments').innerText(), SPOKEN_WORDS);

    // a new file clears the old transcript, and a failed one leaves none behind its error
    await picker.setInputFiles(NOT_AUDIO);
    assert.equal(await view.locator('.segments').count(), 0);
    await page.getByRole('button', { name: 'Transcribe', exact: true }).click();
    await page.locator('#transcribe-error').waitFor({ state: 'visible', timeout: WAIT_MS });
    assert.equal(await view.locator('.segments').count(), 0);
    assert.doesNotMatch(await view.locator('.status').innerText(), /segment/);

    // over the server's upload limit: refused before a byte is sent
    const big = path.join(scratch, 'too-big.wav');
    fs.writeFileSync(big, '');
    fs.truncateSync(big, 105 * 1024 * 1024); // sparse: no disk written
    await picker.setInputFiles(big);
    assert.equal(await page.locator('#transcribe-error').innerText(), 'too-big.wav is 105 MiB; this server takes up to 100 MiB');
    assert.ok(await page.getByRole('button', { name: 'Transcribe', exact: true }).isDisabled());
  });

  it('labels speakers: a colour and a name per voice, a known speaker named by a clip, labels in every export', async () => {
    await page.goto(`${served.ui}/#transcribe`);
    const view = page.locator('#view-transcribe');
    const dialogue = path.join(scratch, 'dialogue.wav');
    writeDialogue(dialogue);
    await view.locator('input[type=file]').first().setInputFiles(dialogue);
    const toggle = page.getByRole('switch', { name: 'Speakers' });
    assert.equal(await toggle.isChecked(), false, 'off by default');
    await toggle.check();

    // a half-filled row is said beside it, and nothing is sent
    const sent: string[] = [];
    const onRequest = (request: { url(): string }): void => void (request.url().includes('/v1/audio/transcriptions') && sent.push(request.url()));
    page.on('request', onRequest);
    await page.getByLabel('Name of known speaker 1').fill('Reader');
    await page.getByRole('button', { name: '+ Add a speaker' }).click();
    // the second row's clip from the microphone (the fake device plays the reader), with no name
    await page.getByRole('button', { name: '● Record', exact: true }).nth(1).click();
    await page.waitForTimeout(2500);
    await page.getByRole('button', { name: '■ Stop', exact: true }).click();
    const rows = view.locator('.known-speaker');
    await rows
      .nth(1)
      .locator('.clip-name')
      .filter({ hasText: /^recording · \d+\.\d s$/ })
      .waitFor({ timeout: WAIT_MS });
    await page.getByRole('button', { name: 'Transcribe', exact: true }).click();
    assert.equal(await rows.nth(0).getByRole('alert').innerText(), 'Choose or record a clip of Reader.');
    assert.equal(await rows.nth(1).getByRole('alert').first().innerText(), 'Name the speaker of this clip.');
    await screenshots(page, 'transcribe-speakers-rows');
    await page.getByRole('button', { name: 'Remove known speaker 2' }).click();
    await page.getByLabel('Clip of known speaker 1').setInputFiles(READER_CLIP);
    await rows.first().locator('.clip-name').filter({ hasText: 'librivox-0890.wav · 5.3 s' }).waitFor({ timeout: WAIT_MS });
    assert.ok(await rows.first().getByRole('alert').isHidden(), 'a fixed row says nothing');
    page.off('request', onRequest);
    assert.deepEqual(sent, [], 'nothing is sent while a row is half filled');

    // the form as the page hands it to fetch (the browser does not tell the request's multipart body with a file in it)
    await page.evaluate(() => {
      const sending = window as unknown as { sentForm: [string, string][] };
      const send = window.fetch;
      window.fetch = (input, init) => {
        if (init?.body instanceof FormData)
          sending.sentForm = [...init.body.entries()].map(([name, value]) => [name, typeof value === 'string' ? value : value.name]);
        return send(input, init);
      };
    });
    const [answer] = await Promise.all([
      page.waitForResponse(/\/v1\/audio\/transcriptions$/, { timeout: 60_000 }),
      page.getByRole('button', { name: 'Transcribe', exact: true }).click(),
    ]);
    const form = await page.evaluate(() => (window as unknown as { sentForm: [string, string][] }).sentForm);
    const field = (name: string): string[] => form.filter(([sent]) => sent === name).map(([, value]) => value);
    assert.deepEqual(field('file'), ['dialogue.wav']);
    assert.deepEqual(field('response_format'), ['verbose_json']);
    assert.deepEqual(field('diarize'), ['true']);
    assert.deepEqual(field('known_speaker_names[]'), ['Reader']);
    const [reference, ...more] = field('known_speaker_references[]');
    assert.equal(more.length, 0);
    assert.match(reference!, /^data:audio\/(x-)?wav;base64,/);
    assert.equal(reference!.slice(reference!.indexOf(',') + 1), fs.readFileSync(READER_CLIP).toString('base64'), 'the clip, whole');
    assert.equal(answer.status(), 200);
    const { segments } = (await answer.json()) as { segments: { start: number; end: number; text: string; speaker: string }[] };

    // runs of one speaker, each labelled; the reader (who speaks first) by the clip's name, JFK by a letter
    const labels = view.locator('.speaker-label');
    await labels.first().waitFor({ timeout: WAIT_MS });
    const runs = segments.filter((segment, i) => i === 0 || segments[i - 1]!.speaker !== segment.speaker).map((segment) => segment.speaker);
    assert.deepEqual(await labels.allInnerTexts(), runs);
    assert.equal(runs[0], 'Reader', `the reader opens the dialogue: ${runs.join(', ')}`);
    const speakers = [...new Set(runs)];
    assert.ok(speakers.length >= 2 && speakers.some((speaker) => /^[A-Z]$/.test(speaker)), `two voices: ${speakers.join(', ')}`);
    const colourOf = async (speaker: string): Promise<string> =>
      labels
        .filter({ hasText: new RegExp(`^${speaker}$`) })
        .first()
        .evaluate((label) => getComputedStyle(label).color);
    const colours = await Promise.all(speakers.map(colourOf));
    assert.equal(new Set(colours).size, speakers.length, `a colour each: ${colours.join(' ')}`);
    // the legend: each speaker once, in its colour, with its talk time
    const legend = view.getByRole('list', { name: 'Speakers' });
    assert.deepEqual(await legend.locator('.speaker-name').allInnerTexts(), speakers);
    for (const [i, entry] of (await legend.locator('li').all()).entries()) {
      assert.match(await entry.locator('.talk-time').innerText(), /^\d+:\d\d\.\d$/);
      assert.equal(await entry.locator('.swatch').evaluate((swatch) => getComputedStyle(swatch).backgroundColor), colours[i]);
    }
    assert.match(await view.locator('.status').innerText(), new RegExp(`^${segments.length} segments?, ${speakers.length} speakers$`));
    await screenshots(page, 'transcribe-speakers');

    // each export carries the labels as the API writes them
    const exported = async (extension: string): Promise<string> => {
      const [file] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: `Export .${extension}` }).click()]);
      return (await downloaded(file)).toString('utf8');
    };
    const cues = (text: string): string[] => text.split(/\r?\n\r?\n/).flatMap((cue) => cue.match(/--> .*\r?\n([\s\S]+)/)?.[1]?.trim() ?? []);
    assert.deepEqual(
      cues(await exported('srt')),
      segments.map((segment) => `${segment.speaker}: ${segment.text.trim()}`),
    );
    assert.deepEqual(
      cues(await exported('vtt')),
      segments.map((segment) => `<v ${segment.speaker}>${segment.text.trim()}`),
    );
    assert.deepEqual(
      (JSON.parse(await exported('json')) as { segments: { speaker: string }[] }).segments.map((segment) => segment.speaker),
      segments.map((segment) => segment.speaker),
    );
    const paragraphs = (await exported('txt')).trim().split('\n\n');
    assert.deepEqual(
      paragraphs.map((paragraph) => paragraph.slice(0, paragraph.indexOf(': '))),
      runs,
    );

    // a name no voice has here: said under the legend rather than given to someone
    await view.locator('input[type=file]').first().setInputFiles(JFK_WAV);
    await page.getByRole('button', { name: 'Transcribe', exact: true }).click();
    await view
      .locator('.speaker-summary .hint')
      .filter({ hasText: /^No voice matched the clip of Reader\.$/ })
      .waitFor({ timeout: WAIT_MS });
    assert.ok(!(await legend.locator('.speaker-name').allInnerTexts()).includes('Reader'), 'JFK is not the reader');

    // a long name wraps on a phone instead of widening the page
    await page.setViewportSize({ width: 360, height: 740 });
    for (const selector of ['.speaker-label', '.speaker-name']) {
      await view
        .locator(selector)
        .first()
        .evaluate((element, word) => (element.textContent += ` ${word}`), LONG_WORD);
    }
    assert.ok((await page.evaluate(() => document.documentElement.scrollWidth)) <= 360, 'no sideways scrolling');
    await page.setViewportSize({ width: 1280, height: 800 });

    // a clip the API cannot take: its error beside the speakers, and no transcript left
    await page.getByLabel('Clip of known speaker 1').setInputFiles(NOT_AUDIO);
    await page.getByRole('button', { name: 'Transcribe', exact: true }).click();
    const error = page.locator('#transcribe-speakers-error');
    await error.waitFor({ state: 'visible', timeout: WAIT_MS });
    assert.match(await error.innerText(), /known speaker 'Reader'/);
    assert.ok(await page.locator('#transcribe-error').isHidden(), 'said once, beside the speakers');
    assert.equal(await view.locator('.segments').count(), 0);
    await screenshots(page, 'transcribe-speakers-error');

    // off again: the next request asks for no speakers, and the rows wait hidden
    await page.getByLabel('Clip of known speaker 1').setInputFiles(READER_CLIP);
    await toggle.uncheck();
    assert.equal(await view.locator('.known-speaker').count(), 0);
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
    // the meter follows the microphone: the clip's speech lifts its value and its bar (a meter fed nothing stays at 0)
    await page.waitForFunction(
      (least) => {
        const meter = document.querySelector('[role="meter"][aria-label="Microphone level"]');
        const bar = meter?.querySelector<HTMLElement>('.level-bar');
        return Number(meter?.getAttribute('aria-valuenow')) >= least && parseFloat(bar?.style.width ?? '') > 0;
      },
      SPEECH_LEVEL,
      { timeout: WAIT_MS },
    );
    await screenshots(page, 'live');

    // the session goes on behind another view, and its tab says so
    const liveTab = page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: /^Live/ });
    await showView(page, /^Speak/);
    assert.match((await liveTab.textContent()) ?? '', /running/);
    await showView(page, /^Live/);
    await page.getByRole('button', { name: /Stop/ }).click();
    await page.getByRole('button', { name: /Start live transcription/ }).waitFor({ timeout: WAIT_MS });
    assert.doesNotMatch((await liveTab.textContent()) ?? '', /running/);
    const meter = page.getByRole('meter', { name: 'Microphone level', includeHidden: true });
    assert.equal(await meter.getAttribute('aria-valuenow'), '0', 'a stopped microphone reads 0');
  });

  it('offers an audio language model (Qwen3-ASR) in Transcribe and Live, its word timestamps box off', async () => {
    const { dir } = await audioLmTestModel({ arch: 'qwen3asr', size: 'tiny' });
    const row = await loadInModelsView(page, served.ui, dir);
    assert.equal(await row.locator('.model-engine').innerText(), 'audio-lm');

    await showView(page, /^Transcribe/);
    const view = page.locator('#view-transcribe');
    await page.locator('#transcribe-model').selectOption(dir);
    assert.ok(await page.locator('#transcribe-words').isDisabled(), 'the model times no words');
    await view.locator('input[type=file]').setInputFiles(JFK_WAV);
    const [answer] = await Promise.all([
      page.waitForResponse(/\/v1\/audio\/transcriptions$/, { timeout: WAIT_MS }),
      page.getByRole('button', { name: 'Transcribe', exact: true }).click(),
    ]);
    assert.equal(answer.status(), 200);
    await view.locator('.segment').first().waitFor({ timeout: WAIT_MS });
    await screenshots(page, 'transcribe-audio-lm');
    await page.locator('#transcribe-model').selectOption('whisper-1');
    assert.ok(await page.locator('#transcribe-words').isEnabled(), 'the default model times words');

    await showView(page, /^Live/);
    assert.ok((await optionText(page, '#live-model', dir))?.startsWith(path.basename(dir)), 'Live offers it too');
  });

  it('offers a Parakeet model in Transcribe and Live like any STT model: a word seeks to its start, live turns complete', async () => {
    const model = await parakeetTestModel({ size: 'tiny' });
    const row = await loadInModelsView(page, served.ui, model);
    assert.equal(await row.locator('.model-task').innerText(), 'speech to text');
    assert.equal(await row.locator('.model-engine').innerText(), 'parakeet');

    await showView(page, /^Transcribe/);
    const view = page.locator('#view-transcribe');
    // by its file name first: a closed picker shows only the start of a long path
    const label = `${path.basename(model)} (${path.dirname(model)})`;
    assert.equal(await optionText(page, '#transcribe-model', model), label);
    await page.locator('#transcribe-model').selectOption(model);
    await view.locator('input[type=file]').setInputFiles(JFK_WAV);
    await page.locator('#transcribe-words').check();
    const [answer] = await Promise.all([
      page.waitForResponse(/\/v1\/audio\/transcriptions$/, { timeout: WAIT_MS }),
      page.getByRole('button', { name: 'Transcribe', exact: true }).click(),
    ]);
    const { words } = (await answer.json()) as { words: { word: string; start: number }[] };
    const buttons = view.locator('.word');
    await buttons.first().waitFor({ timeout: WAIT_MS });
    assert.equal(await buttons.count(), words.length, 'every word has its button');
    const index = Math.floor((words.length * 2) / 3); // well into the clip, so a seek is told from the start
    await buttons.nth(index).click();
    const time = await page.locator('audio[aria-label="Uploaded audio"]').evaluate((element: HTMLAudioElement) => element.currentTime);
    const start = words[index]!.start;
    assert.ok(start > 1 && Math.abs(time - start) < 0.3, `word ${index} starts at ${start} s; the audio is at ${time} s`);
    assert.equal(await page.locator('#transcript-title').innerText(), 'Transcript', 'no language the model did not identify');
    await screenshots(page, 'transcribe-parakeet');

    // it does not translate: audio declared English gets its transcript, as the API's refusal without one says
    await page.locator('#transcribe-task').selectOption('translations');
    await page.locator('#transcribe-language').fill('en');
    await page.getByRole('button', { name: 'Translate', exact: true }).click();
    await page
      .locator('#transcript-title')
      .filter({ hasText: /^Transcript \(english\)$/ })
      .waitFor({ timeout: WAIT_MS });
    assert.ok(await page.locator('#transcribe-error').isHidden());
    await page.locator('#transcribe-task').selectOption('transcriptions');
    await page.locator('#transcribe-language').fill('');

    await showView(page, /^Live/);
    const live = page.locator('#view-live');
    assert.equal(await optionText(page, '#live-model', model), label);
    await page.locator('#live-model').selectOption(model);
    const clear = live.getByRole('button', { name: 'Clear' });
    if (await clear.isEnabled()) await clear.click();
    const [socket] = await Promise.all([page.waitForEvent('websocket'), live.getByRole('button', { name: /Start live transcription/ }).click()]);
    assert.ok(socket.url().endsWith(`/v1/realtime?model=${encodeURIComponent(model)}`), socket.url());
    assert.ok(await page.locator('#live-model').isDisabled(), 'a running session keeps its model');
    // random weights: any text at all, but some
    await live
      .locator('.turns li.done')
      .filter({ hasText: /[^\s…]/ })
      .first()
      .waitFor({ timeout: 45_000 });
    await screenshots(page, 'live-parakeet');
    await live.getByRole('button', { name: /Stop/ }).click();
    await live.getByRole('button', { name: /Start live transcription/ }).waitFor({ timeout: WAIT_MS });
    assert.ok(await page.locator('#live-model').isEnabled());
  });

  it('wraps a word wider than the screen (360 px) in segments, word buttons and live turns', async () => {
    // the transcripts the Parakeet test left in both views, one word of each made long: a random-weight model's are short
    await page.setViewportSize({ width: 360, height: 740 });
    try {
      for (const [view, selectors] of [
        ['transcribe', ['.segment-text', '.word']],
        ['live', ['.turns li']],
      ] as const) {
        await page.evaluate((id) => (location.hash = id), view);
        await page.locator(`#view-${view}`).waitFor({ state: 'visible' });
        for (const selector of selectors) {
          await page
            .locator(`#view-${view} ${selector}`)
            .first()
            .evaluate((element, word) => (element.textContent += ` ${word}`), LONG_WORD);
        }
        const width = await page.evaluate(() => document.documentElement.scrollWidth);
        assert.ok(width <= 360, `#${view} is ${width} px wide at 360 px`);
      }
    } finally {
      await page.setViewportSize({ width: 1280, height: 800 });
    }
  });

  it('speaks with a Kokoro model: its voices (af_heart first), no cloning or instructions, streamed and whole, its languages', async () => {
    const { dir } = await kokoroTestModel();
    const row = await loadInModelsView(page, served.ui, dir);
    assert.equal(await row.locator('.model-engine').innerText(), 'kokoro');

    await showView(page, /^Speak/);
    await page.locator('#speak-model').selectOption(dir);
    const voice = page.locator('#speak-voice');
    await voice.locator('option[value="am_michael"]').waitFor({ state: 'attached', timeout: WAIT_MS });
    assert.equal(await voice.locator('option').count(), 54);
    assert.equal(await voice.inputValue(), 'af_heart', 'its default voice is chosen');
    assert.equal(await optionText(page, '#speak-voice', 'af_heart'), 'af_heart (American English, female)');
    const box = async (element: Locator) => (await element.boundingBox())!;
    assert.ok((await box(voice)).width > (await box(page.locator('#speak-format'))).width, 'voice names get more room than formats');

    const advanced = page.locator('#view-speak details.advanced');
    await advanced.locator('summary').click();
    assert.ok(await advanced.locator('input[type=file]').isDisabled(), 'no reference clip to pick');
    assert.ok(await advanced.getByRole('button', { name: 'Record' }).isDisabled(), 'no reference clip to record');
    assert.ok(await page.locator('#speak-instructions').isDisabled(), 'no instructions to write');
    assert.ok(await page.getByRole('button', { name: '+ New voice' }).isDisabled(), 'no custom voice for a model that cannot clone');
    // said without the model's path, which would fill the line
    assert.match(await advanced.innerText(), /\nThis model cannot clone a voice[\s\S]*\nThis model does not take style instructions/);
    const [clip, instructions] = [await box(advanced.locator('.field').first()), await box(advanced.locator('.field').last())];
    assert.ok(instructions.y - (clip.y + clip.height) >= 8, "the instructions field does not touch the reference clip's hint");

    const text = page.locator('#speak-text');
    for (const stream of [true, false]) {
      await text.fill(`Kokoro speaks ${stream ? 'streamed' : 'whole'}.`);
      if (!stream) await page.locator('#speak-stream').uncheck();
      const [speech] = await Promise.all([page.waitForRequest(/\/v1\/audio\/speech$/), page.getByRole('button', { name: 'Generate' }).click()]);
      assert.deepEqual(speech.postDataJSON(), {
        model: dir,
        input: await text.inputValue(),
        voice: 'af_heart',
        response_format: 'mp3',
        speed: 1,
        stream,
        lang_code: 'a',
      });
      await page
        .locator('.history li')
        .first()
        .filter({ hasText: `Kokoro speaks ${stream ? 'streamed' : 'whole'}` })
        .waitFor({ timeout: WAIT_MS });
    }
    assert.match(await page.locator('.history-meta').first().innerText(), new RegExp(`^${path.basename(dir)} · af_heart · mp3 · `), 'the model by name');
    // its languages, the voice's own chosen with it: a Spanish voice reads Spanish
    const language = page.locator('#speak-language');
    assert.equal(await language.locator('option').count(), 7);
    assert.equal(await language.inputValue(), 'a');
    await voice.selectOption('ef_dora');
    assert.equal(await language.inputValue(), 'e');
    await text.fill('Hola.');
    const [spanish] = await Promise.all([page.waitForRequest(/\/v1\/audio\/speech$/), page.getByRole('button', { name: 'Generate' }).click()]);
    assert.equal(spanish.postDataJSON().lang_code, 'e');
    await page.locator('.history li').first().filter({ hasText: 'Hola.' }).waitFor({ timeout: WAIT_MS });
    await voice.selectOption('af_heart');
    await page.locator('#view-speak canvas.waveform').first().waitFor({ timeout: WAIT_MS });
    await screenshots(page, 'speak-kokoro');
  });

  it('speak: makes a custom voice from a sample and a recorded consent, speaks with it, and deletes it', async () => {
    const { dir } = await makeTiny('pockettts');
    await loadInModelsView(page, served.ui, dir);
    await showView(page, /^Speak/);
    await page.locator('#speak-model').selectOption(dir);
    const voice = page.locator('#speak-voice');
    await voice.locator('option').first().waitFor({ state: 'attached', timeout: WAIT_MS });
    const newVoice = page.getByRole('button', { name: '+ New voice' });
    await newVoice.click();
    const card = page.locator('form.new-voice');
    assert.ok(await page.locator('#voice-name').evaluate((input) => input === document.activeElement), 'the name field takes focus');
    await page.locator('#voice-name').fill('Kennedy');
    const create = card.getByRole('button', { name: 'Create voice' });

    // a sample under 2 s is refused beside it, before anything is sent
    await card.getByLabel('Voice sample').setInputFiles({ name: 'short.wav', mimeType: 'audio/wav', buffer: wavBytes(new Float32Array(16000), 16000) });
    await page
      .locator('#voice-sample-problem')
      .filter({ hasText: 'This clip lasts 1.0 s; a voice is made from a clip of 2 to 30 s.' })
      .waitFor({ timeout: WAIT_MS });
    assert.ok(await create.isDisabled());
    await card.getByLabel('Voice sample').setInputFiles(JFK_WAV);
    await card.locator('.clip-name').first().filter({ hasText: 'jfk.wav · 11.0 s' }).waitFor({ timeout: WAIT_MS });
    await page.locator('#voice-transcript').fill('And so my fellow Americans, ask not what your country can do for you.');
    assert.ok(await create.isDisabled(), 'the server asks for consent: none yet');

    // the consent: the speaker reads the statement, recorded from the microphone (the fake device plays a reader)
    assert.match(await card.locator('.consent-statement').innerText(), /^I, Kennedy, agree that this server may make a synthetic voice/);
    await card.getByRole('button', { name: '● Record', exact: true }).last().click();
    await page.waitForTimeout(2500);
    await card.getByRole('button', { name: '■ Stop', exact: true }).click();
    await card
      .locator('.clip-name')
      .last()
      .filter({ hasText: /^recording · \d+\.\d s$/ })
      .waitFor({ timeout: WAIT_MS });
    await page.locator('#voice-consent-language').fill('en-US');
    await screenshots(page, 'speak-new-voice');
    const [made] = await Promise.all([page.waitForResponse(/\/v1\/audio\/voices$/), create.click()]);
    assert.equal(made.status(), 200, await made.text());
    const created = (await made.json()) as { id: string; name: string; consent: string; ref_text: string };
    assert.equal(created.name, 'Kennedy');
    assert.match(created.consent, /^cons_/);
    assert.match(created.ref_text, /^And so my fellow Americans/);
    await card.waitFor({ state: 'detached' });

    // chosen in the voice list, under the custom voices; speech names it by ID
    await page.waitForFunction((id) => (document.querySelector('#speak-voice') as HTMLSelectElement | null)?.value === id, created.id, { timeout: WAIT_MS });
    assert.equal(await voice.locator('optgroup[label="Custom voices"] option').innerText(), 'Kennedy');
    await page.locator('#speak-stream').uncheck();
    await page.locator('#speak-text').fill('Spoken in a custom voice.');
    const [speech] = await Promise.all([page.waitForRequest(/\/v1\/audio\/speech$/), page.getByRole('button', { name: 'Generate' }).click()]);
    assert.equal(speech.postDataJSON().voice, created.id);
    await page.locator('.history li').first().filter({ hasText: 'Spoken in a custom voice.' }).waitFor({ timeout: WAIT_MS });
    assert.match(await page.locator('.history-meta').first().innerText(), / · Kennedy · mp3 · /, 'the history names the voice');
    await screenshots(page, 'speak-custom-voice');

    // the consent is kept: a second voice may name it instead of a new recording
    await newVoice.click();
    await page.locator(`#voice-consent option[value="${created.consent}"]`).waitFor({ state: 'attached', timeout: WAIT_MS });
    assert.equal(await optionText(page, '#voice-consent', created.consent), 'Kennedy (en-US)');
    await card.getByRole('button', { name: 'Cancel' }).click();

    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Delete', exact: true }).click();
    await voice.locator('optgroup').waitFor({ state: 'detached', timeout: WAIT_MS });
    assert.notEqual(await voice.inputValue(), created.id);
    assert.equal((await fetch(`${served.api}/v1/audio/voices/${created.id}`)).status, 404);
    await page.locator('#speak-stream').check();
  });

  it('separates a mixture into target and residual, each playable and downloadable as WAV', async () => {
    await page.goto(`${served.ui}/#separate`);
    const view = page.locator('#view-separate');
    await view.locator('input[type=file]').setInputFiles(DRUMS);
    await page.locator('#separate-description').fill('drums');
    await page.getByRole('button', { name: 'Separate' }).click();
    await page.getByRole('link', { name: 'Download residual WAV' }).waitFor({ timeout: WAIT_MS });
    assert.equal(await view.locator('audio').count(), 3, 'input, target and residual players');
    for (const name of ['Download target WAV', 'Download residual WAV']) {
      const [file] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name }).click()]);
      const bytes = await downloaded(file);
      assert.equal(bytes.subarray(0, 4).toString('latin1'), 'RIFF', name);
      assert.equal(bytes.subarray(8, 12).toString('latin1'), 'WAVE', name);
    }
    await view.locator('canvas.waveform').nth(2).waitFor({ timeout: WAIT_MS });
    await screenshots(page, 'separate');

    // a failed separation leaves no earlier stems under its error
    await view.locator('input[type=file]').setInputFiles(NOT_AUDIO);
    await page.getByRole('button', { name: 'Separate' }).click();
    await page.locator('#separate-error').waitFor({ state: 'visible', timeout: WAIT_MS });
    assert.equal(await page.getByRole('link', { name: 'Download residual WAV' }).count(), 0);
    assert.doesNotMatch(await view.locator('.status').innerText(), /Extracted/);
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
    // a model with a file shows its size, a built-in one none
    assert.match(await page.locator(`tr[data-model="${SILERO_V6}"] .model-size`).innerText(), /^\d+(\.\d)? (KiB|MiB)$/);
    assert.equal(await row.locator('.model-size').innerText(), '—');

    await page.locator('#model-id').fill('/nonexistent/model.bin');
    await page.getByRole('button', { name: 'Load', exact: true }).click();
    const error = page.locator('#model-form-error');
    await error.waitFor({ state: 'visible', timeout: WAIT_MS });
    assert.match(await error.innerText(), /code: \w+$/, 'the envelope code is shown');
    await screenshots(page, 'models');

    // 360 px wide: no view scrolls sideways
    await page.setViewportSize({ width: 360, height: 740 });
    for (const view of ['speak', 'transcribe', 'live', 'separate', 'models']) {
      await page.evaluate((id) => (location.hash = id), view);
      await page.locator(`#view-${view}`).waitFor({ state: 'visible' });
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width <= 360, `#${view} is ${width} px wide at 360 px`);
    }
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it('downloads a catalog model with a progress bar and Cancel, and offers catalog models in the menus with their size', async () => {
    let release = (): void => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    hub.setFaults(CATALOG_VAD.repo, CATALOG_VAD.file, { chunkDelayMs: 30, pauseAt: { bytes: 400_000, until: held } });
    try {
      await page.goto(`${served.ui}/#models`);
      const row = page.locator('tr[data-model="silero-vad"]');
      await row.waitFor({ timeout: WAIT_MS });
      assert.match(await row.innerText(), /864\.4 KiB/, 'its download size');
      assert.match(await row.locator('.badge').innerText(), /^not downloaded$/);
      await row.getByRole('button', { name: 'Download silero-vad' }).click();
      // the bar fills as the server reports bytes, with the size and (once there is a rate) the time left
      await page.waitForFunction(
        () => ((document.querySelector('tr[data-model="silero-vad"] progress') as HTMLProgressElement | null)?.value ?? 0) > 300_000,
        null,
        {
          timeout: WAIT_MS,
        },
      );
      assert.match(await row.locator('.fetch-progress').innerText(), /^\d+(\.\d)? KiB of 864\.4 KiB/);
      await screenshots(page, 'models-download');
      await row.getByRole('button', { name: 'Cancel the download of silero-vad' }).click();
      await page
        .locator('.row-error')
        .filter({ hasText: /cancelled/ })
        .waitFor({ timeout: WAIT_MS });
      assert.match(await page.locator('.row-error').innerText(), /code: download_cancelled/);
    } finally {
      release();
      hub.setFaults(CATALOG_VAD.repo, CATALOG_VAD.file, {});
    }
    const row = page.locator('tr[data-model="silero-vad"]');
    await row.getByRole('button', { name: 'Download silero-vad' }).click();
    await row
      .locator('.badge')
      .filter({ hasText: /^loaded$/ })
      .waitFor({ timeout: WAIT_MS });
    assert.equal(hub.contentTransfers(CATALOG_VAD.repo, CATALOG_VAD.file).at(-1)?.range, 'bytes=400000-', 'the second download resumed the first');

    // a menu offers catalog models not yet downloaded, with their size, and the download under it
    await showView(page, /^Transcribe/);
    const menu = page.locator('#transcribe-model');
    const chosen = await menu.inputValue();
    assert.equal(await optionText(page, '#transcribe-model', 'parakeet-v3'), 'parakeet-v3 (637.8 MiB to download)');
    await menu.selectOption('parakeet-v3');
    const offer = page.locator('#view-transcribe .catalog-fetch');
    assert.match(await offer.innerText(), /^Not downloaded yet: 637\.8 MiB, about 1\.86 GiB of memory\.\s*Download$/);
    await screenshots(page, 'transcribe-catalog');
    await menu.selectOption(chosen);
    await offer.waitFor({ state: 'detached' });
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
    // the model list's own refresh fails too: said once, by the banner, and nothing offers to act meanwhile
    await page.waitForEvent('requestfailed', { predicate: (request) => request.url().includes('/v1/models'), timeout: WAIT_MS });
    await page.waitForTimeout(500); // its render
    assert.equal(await page.locator('#view-models').getByText('Cannot reach the voxd server').count(), 0, 'the banner says it, the list not again');
    assert.equal(await page.locator('tr[data-model="sphinx"] button').isDisabled(), true, 'Load is disabled while the server is down');
    await screenshots(page, 'server-down');
  });
});
