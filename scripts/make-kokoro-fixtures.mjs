#!/usr/bin/env node
// Regenerates test/fixtures/kokoro: the upstream Kokoro model's outputs (hexgrad/kokoro's own code, in
// ../shared/reference/kokoro, run by scripts/kokoro-oracle.py on Debian's python3-torch) for the random-weight test
// model that scripts/make-kokoro-test-model.mjs writes, so that `npm test` checks voxd's Kokoro against upstream
// without PyTorch (test/engines/kokoro-oracle.test.ts). Run it whenever that writer's output changes: the manifest
// records the checkpoint's SHA-256, and the tests refuse fixtures made from another checkpoint.
//
//   node scripts/make-kokoro-fixtures.mjs     (needs /usr/bin/python3 with torch: apt-get install python3-torch)
//
// Each case is a phoneme string, a voice and a speed; `full` cases also keep the generator's harmonic source, its
// spectrum and its last convolution's output and the decoder's input (about 0.7 MB for a short phrase), which the
// tests feed to voxd's generator. The phrases were picked so that no duration lies within 0.01 of a rounding tie (case.json's
// `closest_tie`): durations must then agree exactly.
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeKokoroTestModel, unpackVoicePacks } from './make-kokoro-test-model.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const REFERENCE = path.resolve(ROOT, '..', 'shared', 'reference', 'kokoro');
const OUT = path.join(ROOT, 'test', 'fixtures', 'kokoro');
/** The model the fixtures are for: the tests make the same one. */
export const KOKORO_FIXTURE_MODEL = { size: 'tiny', seed: 1 };
/** Duration ties closer than this make a case too fragile to compare exactly. */
const MIN_TIE_DISTANCE = 0.01;

const CASES = [
  { name: 'short', phonemes: 'hˈI ðˈɛɹ!', voice: 'af_heart', speed: 1, full: true },
  { name: 'question', phonemes: 'hˌW ɑɹ ju?', voice: 'am_michael', speed: 1.2, full: false },
  { name: 'slow', phonemes: 'ðə kwˈɪk bɹˈWn fˈɑks.', voice: 'bf_emma', speed: 0.8, full: false },
];

const model = await makeKokoroTestModel(KOKORO_FIXTURE_MODEL);
const voicesDir = fs.mkdtempSync(path.join(OUT, '..', '.kokoro-voices-'));
try {
  // the oracle reads raw float32 packs, as kokoro-js ships them (the model's .pt packs hold the same values)
  unpackVoicePacks(voicesDir);
  const cases = CASES.map((c) => ({ ...c, voice: path.join(voicesDir, `${c.voice}.bin`) }));
  const casesFile = path.join(voicesDir, 'cases.json');
  fs.writeFileSync(casesFile, JSON.stringify(cases));
  fs.rmSync(OUT, { recursive: true, force: true });
  fs.mkdirSync(OUT, { recursive: true });
  const run = spawnSync('/usr/bin/python3', [path.join(ROOT, 'scripts', 'kokoro-oracle.py'), REFERENCE, model.dir, casesFile, OUT], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (run.status !== 0) throw new Error(`the oracle failed (exit ${run.status}); it needs /usr/bin/python3 with torch (apt-get install python3-torch)`);
  for (const c of CASES) {
    const meta = JSON.parse(fs.readFileSync(path.join(OUT, c.name, 'case.json'), 'utf8'));
    if (meta.closest_tie < MIN_TIE_DISTANCE) throw new Error(`case ${c.name}: a duration lies ${meta.closest_tie} from a rounding tie; pick another phrase`);
  }
  const sha256 = createHash('sha256').update(fs.readFileSync(model.checkpoint)).digest('hex');
  fs.writeFileSync(
    path.join(OUT, 'manifest.json'),
    `${JSON.stringify({ model: KOKORO_FIXTURE_MODEL, checkpointSha256: sha256, cases: CASES, made: 'node scripts/make-kokoro-fixtures.mjs' }, null, 1)}\n`,
  );
  console.log(`wrote ${OUT}`);
} finally {
  fs.rmSync(voicesDir, { recursive: true, force: true });
}
