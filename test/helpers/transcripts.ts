import { spawnSync } from 'node:child_process';
import fs from 'node:fs';

/** The built-in `sphinx` model needs Debian's pocketsphinx-en-us at run time (npm install adds it as root on Debian). */
export const SPHINX_INSTALLED = fs.existsSync('/usr/share/pocketsphinx/model/en-us/en-us/mdef');

/** The built-in `flite` voices need Debian's libflite1 at run time (npm install adds it as root on Debian). */
export const FLITE_INSTALLED = spawnSync('/sbin/ldconfig', ['-p'], { encoding: 'utf8' }).stdout?.includes('libflite_cmu_us_slt.so.1') ?? false;

/** Lower-case words without punctuation, as word error rates are counted. */
export function words(text: string): string[] {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9' ]+/g, ' ')
    .split(/\s+/)
    .filter(Boolean);
}

/** Word error rate: word-level edit distance over the reference length. */
export function wer(reference: string, hypothesis: string): number {
  const ref = words(reference);
  const hyp = words(hypothesis);
  let row = Array.from({ length: hyp.length + 1 }, (_, j) => j);
  for (let i = 1; i <= ref.length; i++) {
    const next = [i];
    for (let j = 1; j <= hyp.length; j++) {
      next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (ref[i - 1] === hyp[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[hyp.length]! / ref.length;
}
