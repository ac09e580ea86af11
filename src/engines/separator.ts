/**
 * The built-in separator `spectral`: signal processing in the native addon, nothing to download. Every target is a
 * soft time-frequency mask on a short-time Fourier transform (~46 ms Hann frames, 75 % overlap), computed in blocks
 * of ~12 s with context on each side, on a worker thread. `harmonic` and `accompaniment` are computed as the input
 * minus `percussive` and `voice`, so the pairs sum to the input.
 */
import { availableParallelism } from 'node:os';
import type { NativeSeparationMethod } from '../native/addon.js';
import { loadNative } from '../native/load.js';
import { abortFlagFor } from '../native/abort.js';
import type { PcmAudio, SeparationTarget, SeparatorModel } from './types.js';

/** The reserved model ID of the built-in separator. */
export const SEPARATOR_MODEL_ID = 'spectral';
export const SEPARATOR_ENGINE = 'voxd-dsp';

interface SpectralTarget extends SeparationTarget {
  readonly native: NativeSeparationMethod;
}

/** In order of preference when a description names two targets equally well (the earlier word wins first). */
const TARGETS: readonly SpectralTarget[] = [
  {
    name: 'voice',
    native: 'voice',
    synonyms: [
      'voice',
      'vocal',
      'vox',
      'speech',
      'speaking',
      'speaker',
      'talking',
      'talk',
      'singing',
      'singer',
      'vocalist',
      'dialogue',
      'dialog',
      'narration',
      'narrator',
      'conversation',
      'rap',
      'rapper',
      'choir',
      'spoken word',
      'lead vocal',
      'backing vocal',
      'background vocal',
      'human voice',
    ],
    method:
      'what neither repeats nor stays: for each frame the median of its most similar frames (REPET-SIM) and a low ' +
      'per-bin percentile are the background, the excess over it a Wiener mask, weighted by a speech-band prior ' +
      '(80 Hz to 8 kHz) and, in stereo, by how centred each bin is',
  },
  {
    name: 'percussive',
    native: 'percussive',
    synonyms: [
      'percussive',
      'percussion',
      'drum',
      'drum kit',
      'drumkit',
      'drum loop',
      'bass drum',
      'beat',
      'hit',
      'kick',
      'snare',
      'hi hat',
      'hihat',
      'cymbal',
      'tabla',
      'clap',
      'transient',
    ],
    method:
      'harmonic/percussive separation: a median across frequency (~500 Hz) against a median across time (~0.2 s) ' +
      'of the magnitude spectrogram, soft mask P²/(P²+H²)',
  },
  {
    name: 'bass',
    native: 'bass',
    synonyms: ['bass', 'bassline', 'bass line', 'bass guitar', 'double bass', 'sub bass', 'low end'],
    method: 'the harmonic component below ~250 Hz (a smooth 8th-order roll-off above)',
  },
  {
    name: 'harmonic',
    native: 'harmonic',
    synonyms: [
      'harmonic',
      'harmony',
      'tonal',
      'instrument',
      'piano',
      'guitar',
      'string',
      'violin',
      'cello',
      'organ',
      'synth',
      'keyboard',
      'keys',
      'pad',
      'melody',
      'chord',
    ],
    method: 'the input minus the percussive target: the harmonic soft mask H²/(P²+H²)',
  },
  {
    name: 'accompaniment',
    native: 'accompaniment',
    synonyms: ['accompaniment', 'music', 'background', 'background music', 'instrumental', 'backing', 'backing track', 'karaoke', 'minus one'],
    method: 'the input minus the voice target: everything but the voice',
  },
];

/** Lower-case words of a description (hyphens and punctuation split words: "hi-hat" is "hi hat"). */
function words(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/** A word and its singular candidates: drums → drum, basses → bass, melodies → melody. */
function forms(word: string): string[] {
  const out = [word];
  if (word.length > 3 && word.endsWith('ies')) out.push(`${word.slice(0, -3)}y`);
  if (word.length > 3 && word.endsWith('es')) out.push(word.slice(0, -2));
  if (word.length > 2 && word.endsWith('s') && !word.endsWith('ss')) out.push(word.slice(0, -1));
  return out;
}

interface Match {
  target: SpectralTarget;
  length: number;
  position: number;
}

/** The longest synonym found among the words (more specific: "bass drum", "background vocals"); then the earliest. */
function bestMatch(description: string): SpectralTarget | null {
  const said = words(description).map(forms);
  let best: Match | null = null;
  for (const target of TARGETS) {
    for (const synonym of target.synonyms) {
      const parts = synonym.split(' ');
      for (let at = 0; at + parts.length <= said.length; at++) {
        if (!parts.every((part, i) => said[at + i]!.includes(part))) continue;
        if (!best || parts.length > best.length || (parts.length === best.length && at < best.position)) {
          best = { target, length: parts.length, position: at };
        }
        break;
      }
    }
  }
  return best?.target ?? null;
}

class SpectralSeparatorModel implements SeparatorModel {
  readonly task = 'separation' as const;
  readonly engine = SEPARATOR_ENGINE;
  /** One job runs on one thread: as many jobs as cores. */
  readonly concurrency = Math.max(1, availableParallelism());
  readonly targets: readonly SeparationTarget[] = TARGETS;

  constructor(readonly id: string) {}

  match(description: string): SeparationTarget | null {
    return bestMatch(description);
  }

  separate(audio: PcmAudio, target: SeparationTarget, signal?: AbortSignal): Promise<Float32Array[]> {
    const known = TARGETS.find((t) => t === target || t.name === target.name);
    if (!known) return Promise.reject(Object.assign(new Error(`model ${this.id} cannot separate '${target.name}'`), { code: 'invalid_argument' }));
    return loadNative().separate(audio.channels, { sampleRate: audio.sampleRate, method: known.native }, abortFlagFor(signal));
  }

  async dispose(): Promise<void> {
    // nothing native is held between calls
  }
}

/** The built-in separator under `id` (normally SEPARATOR_MODEL_ID). Throws NativeLoadError when the addon is missing. */
export async function loadSeparatorModel(id: string = SEPARATOR_MODEL_ID): Promise<SeparatorModel> {
  loadNative();
  return new SpectralSeparatorModel(id);
}
