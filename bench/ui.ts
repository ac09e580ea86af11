/**
 * `npm run bench:ui`: the web interface's weight and speed. Prints each built asset's size (raw, gzip, brotli)
 * against the 200 KB gzipped JavaScript budget, then opens the page in chromium (Debian's, as the tests do) against
 * `voxd serve --start-ui` and prints first paint and first contentful paint, cold (empty cache) and warm, over
 * several loads. A measurement, not a test: it fails only when the budget is exceeded.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { chromium } from 'playwright-core';
import { UI_DIST_DIR } from '../src/ui/assets.js';
import { freePort } from '../test/helpers/process.js';
import { startCliServer, stopCliServer } from './cli-server.js';

const JS_BUDGET_GZIP_BYTES = 200 * 1024;
const LOADS = 5;

function kib(bytes: number): string {
  return `${(bytes / 1024).toFixed(1)} KiB`;
}

function bundleSizes(): number {
  let scriptGzip = 0;
  console.log('asset                               raw        gzip      brotli');
  for (const name of fs.readdirSync(UI_DIST_DIR, { recursive: true }) as string[]) {
    const file = path.join(UI_DIST_DIR, name);
    if (!fs.statSync(file).isFile()) continue;
    const body = fs.readFileSync(file);
    const gzip = zlib.gzipSync(body, { level: 9 }).length;
    const brotli = zlib.brotliCompressSync(body).length;
    if (name.endsWith('.js')) scriptGzip += gzip;
    console.log(`${name.padEnd(34)} ${kib(body.length).padStart(10)} ${kib(gzip).padStart(10)} ${kib(brotli).padStart(10)}`);
  }
  console.log(`JavaScript, gzipped: ${kib(scriptGzip)} of the ${kib(JS_BUDGET_GZIP_BYTES)} budget`);
  return scriptGzip;
}

async function firstPaint(): Promise<void> {
  const scratch = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-bench-ui-'));
  const uiPort = await freePort();
  const server = await startCliServer(scratch, ['--start-ui', '--ui-host', '127.0.0.1', '--ui-port', String(uiPort)]);
  const browser = await chromium.launch({ executablePath: execFileSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).trim() });
  try {
    const context = await browser.newContext();
    const page = await context.newPage();
    const cdp = await context.newCDPSession(page);
    type Load = { paint: number; contentful: number; ready: number };
    const measure = async (): Promise<Load> => {
      await page.goto(`http://127.0.0.1:${uiPort}/`, { waitUntil: 'load' });
      await page.locator('#speak-voice option').first().waitFor({ state: 'attached' });
      return page.evaluate(() => {
        const paints = Object.fromEntries(performance.getEntriesByType('paint').map((entry) => [entry.name, entry.startTime]));
        return { paint: paints['first-paint'] ?? NaN, contentful: paints['first-contentful-paint'] ?? NaN, ready: performance.now() };
      });
    };
    for (const cache of ['cold', 'warm'] as const) {
      const runs: Load[] = [];
      for (let i = 0; i < LOADS; i++) {
        if (cache === 'cold') await cdp.send('Network.clearBrowserCache');
        runs.push(await measure());
      }
      const median = (key: keyof Load): string => {
        const sorted = runs.map((run) => run[key]).sort((a, b) => a - b);
        return `${sorted[Math.floor(sorted.length / 2)]!.toFixed(0)} ms`;
      };
      console.log(
        `${cache} cache, median of ${LOADS} loads: first paint ${median('paint')}, first contentful paint ${median('contentful')}, voices listed ${median('ready')}`,
      );
    }
  } finally {
    await browser.close();
    await stopCliServer(server);
    await fsp.rm(scratch, { recursive: true, force: true });
  }
}

const scriptGzip = bundleSizes();
await firstPaint();
if (scriptGzip > JS_BUDGET_GZIP_BYTES) {
  console.error(`over budget: ${kib(scriptGzip)} of JavaScript, gzipped`);
  process.exit(1);
}
