/**
 * Ways to make new inputs from seeds: byte mutations (for bodies, uploads and text seen as UTF-8), text mutations
 * (which may split surrogate pairs: lone surrogates are wanted), and generators of structured text from scratch:
 * the shapes that break text front ends (runs of punctuation, long tokens, numbers, abbreviations, Unicode,
 * control characters, markup).
 */
import type { Rng } from './random.js';

// ---- bytes ----

/** Byte values that sit on boundaries: NUL, ASCII's ends, UTF-8 lead and continuation bytes, 0xff. */
const BOUNDARY_BYTES = [0x00, 0x01, 0x0a, 0x0d, 0x20, 0x22, 0x25, 0x2c, 0x2e, 0x5c, 0x7f, 0x80, 0xbf, 0xc0, 0xc3, 0xe2, 0xed, 0xf0, 0xf4, 0xfe, 0xff];

/** A random [start, end) within `length` (empty when length is 0). */
function span(rng: Rng, length: number, maxSpan = length): [number, number] {
  const start = rng.below(length + 1);
  return [start, Math.min(length, start + rng.length(Math.max(1, maxSpan)))];
}

function concatBytes(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/**
 * One mutation of `bytes`: a bit flip, a boundary byte, an insertion or deletion, a run repeated, or a piece of
 * another seed spliced in. The result is never longer than `maxLength`.
 */
export function mutateBytes(rng: Rng, bytes: Uint8Array, seeds: readonly Uint8Array[], maxLength: number): Uint8Array {
  const out = bytes.slice();
  const mutation = rng.weighted<() => Uint8Array>([
    [3, () => flipBit(out)],
    [2, () => setBoundaryByte(out)],
    [2, () => insertRandomBytes(out)],
    [2, () => deleteRange(out)],
    [3, () => repeatRange(out)],
    [2, () => spliceSeed(out)],
  ]);
  const result = mutation();
  return result.length > maxLength ? result.subarray(0, maxLength) : result;

  function flipBit(b: Uint8Array): Uint8Array {
    if (b.length > 0) b[rng.below(b.length)]! ^= 1 << rng.below(8);
    return b;
  }
  function setBoundaryByte(b: Uint8Array): Uint8Array {
    if (b.length > 0) b[rng.below(b.length)] = rng.pick(BOUNDARY_BYTES);
    return b;
  }
  function insertRandomBytes(b: Uint8Array): Uint8Array {
    const at = rng.below(b.length + 1);
    const inserted = Uint8Array.from({ length: rng.length(16) }, () => (rng.chance(0.5) ? rng.pick(BOUNDARY_BYTES) : rng.below(256)));
    return concatBytes(b.subarray(0, at), inserted, b.subarray(at));
  }
  function deleteRange(b: Uint8Array): Uint8Array {
    const [start, end] = span(rng, b.length);
    return concatBytes(b.subarray(0, start), b.subarray(end));
  }
  function repeatRange(b: Uint8Array): Uint8Array {
    const [start, end] = span(rng, b.length, 16);
    const piece = b.subarray(start, end);
    const copies = Array.from({ length: rng.length(Math.floor(maxLength / Math.max(1, piece.length))) }, () => piece);
    return concatBytes(b.subarray(0, end), ...copies, b.subarray(end));
  }
  function spliceSeed(b: Uint8Array): Uint8Array {
    const donor = seeds.length > 0 ? rng.pick(seeds) : b;
    const [from, to] = span(rng, donor.length);
    const at = rng.below(b.length + 1);
    return concatBytes(b.subarray(0, at), donor.subarray(from, to), b.subarray(rng.chance(0.5) ? at : Math.min(b.length, at + to - from)));
  }
}

// ---- text ----

/** ASCII punctuation and symbols (every printable that is not a letter, digit or space). */
export const ASCII_PUNCTUATION = '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~';

/** Characters that trip text front ends, beyond ASCII punctuation. */
const AWKWARD_CHARS = [
  '\u0000',
  '\u0001',
  '\u0007',
  '\b',
  '\t',
  '\n',
  '\u000b',
  '\f',
  '\r',
  '\u001b',
  '\u007f',
  '\u0085',
  '\u00a0',
  '\u00ad',
  '\u0301',
  '\u200b',
  '\u200d',
  '\u200e',
  '\u2028',
  '\u2029',
  '\u202e',
  '\u2026',
  '\u2014',
  '\u2019',
  '\u201c',
  '\u00e9',
  '\u00df',
  '\u0130',
  '\u03a3',
  '\u0416',
  '\u05d0',
  '\u0627',
  '\u0e01',
  '\u4e2d',
  '\u3000',
  '\uff01',
  '\ufeff',
  '\ufffd',
  '\ufffe',
  '\ud800',
  '\udfff',
  '\ud83d\ude00',
  '\ud83c\udff3\ufe0f\u200d\ud83c\udf08',
  '\udb40\udc01',
];

const WORDS = [
  'the',
  'a',
  'Hello',
  'world',
  'read',
  'lead',
  'live',
  'St',
  'Dr',
  'Mr',
  'Mrs',
  'etc',
  'vs',
  'Inc',
  'USA',
  'NASA',
  'I',
  'II',
  'IV',
  'XIV',
  'WWII',
  'OK',
  'ok',
  'x',
  'y',
  'z',
  'pneumonoultramicroscopicsilicovolcanoconiosis',
  'co-operate',
  "don't",
  "it's",
  'C++',
  'C#',
  'node.js',
  'e.g.',
  'i.e.',
  'a.m.',
  'p.m.',
  'U.S.A.',
  'Ph.D.',
];

const ABBREVIATIONS = [
  'Mr.',
  'Mrs.',
  'Dr.',
  'St.',
  'Ave.',
  'Jr.',
  'Sr.',
  'No.',
  'vs.',
  'etc.',
  'e.g.',
  'i.e.',
  'a.m.',
  'p.m.',
  'U.S.',
  'U.K.',
  'Jan.',
  'Fig.',
  'approx.',
  'Ltd.',
];

/** `count` characters drawn from `alphabet` (code units; a surrogate half may come alone). */
function drawn(rng: Rng, alphabet: string | readonly string[], count: number): string {
  let out = '';
  for (let i = 0; i < count; i++) out += rng.pick(typeof alphabet === 'string' ? [...alphabet] : alphabet);
  return out;
}

/** A code point from anywhere in Unicode, surrogates and noncharacters included. */
function anyCodePoint(rng: Rng): string {
  const plane = rng.weighted<() => number>([
    [4, () => rng.below(0x80)],
    [3, () => rng.below(0x800)],
    [3, () => rng.below(0x10000)],
    [1, () => rng.below(0x110000)],
  ])();
  return plane >= 0xd800 && plane <= 0xdfff ? String.fromCharCode(plane) : String.fromCodePoint(plane);
}

function digits(rng: Rng, count: number): string {
  return drawn(rng, '0123456789', count);
}

/** A number as people write them: grouped, decimal, signed, currency, percent, ordinal, exponent, time, range. */
function numberLike(rng: Rng, maxDigits: number): string {
  const n = rng.length(maxDigits);
  return rng.weighted<() => string>([
    [3, () => digits(rng, n)],
    [2, () => digits(rng, rng.int(1, 3)) + Array.from({ length: Math.ceil(n / 3) }, () => ',' + digits(rng, 3)).join('')],
    [2, () => `${rng.pick(['', '-', '+', '$', '-$', '£', '€', '#'])}${digits(rng, n)}.${digits(rng, rng.length(8))}`],
    [1, () => `${digits(rng, n)}${rng.pick(['%', 'st', 'nd', 'rd', 'th', 's', "'s", 'k', 'M', 'e10', 'e-308', 'x', 'am', 'pm'])}`],
    [1, () => `${digits(rng, 2)}:${digits(rng, 2)}${rng.chance(0.5) ? ':' + digits(rng, 2) : ''}`],
    [1, () => `${digits(rng, rng.int(1, 4))}${rng.pick(['-', '/', '.', 'x', '–'])}${digits(rng, rng.int(1, 4))}`],
    [1, () => '0x' + drawn(rng, '0123456789abcdefABCDEF', n)],
    [1, () => drawn(rng, 'IVXLCDM', rng.length(16))],
  ])();
}

/** One token (no whitespace inside) of some awkward shape, at most about `maxLength` characters. */
export function awkwardToken(rng: Rng, maxLength: number): string {
  return rng.weighted<() => string>([
    [3, () => rng.pick(WORDS)],
    [2, () => rng.pick(WORDS) + drawn(rng, rng.chance(0.5) ? '.!?,;:' : ASCII_PUNCTUATION, rng.length(maxLength))],
    [1, () => drawn(rng, rng.chance(0.7) ? '"\'`({[' : ASCII_PUNCTUATION, rng.length(maxLength)) + rng.pick(WORDS)],
    [2, () => rng.pick([...ASCII_PUNCTUATION]).repeat(rng.length(maxLength))],
    [2, () => drawn(rng, ASCII_PUNCTUATION, rng.length(maxLength))],
    [2, () => rng.pick(['x', 'a', 'Z', '1', '0', '9', 'é', '中', '\u0301', '%', '&', '/', '-', '_']).repeat(rng.length(maxLength))],
    [2, () => drawn(rng, 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ', rng.length(maxLength))],
    [3, () => numberLike(rng, Math.min(maxLength, 200))],
    [2, () => rng.pick(ABBREVIATIONS).repeat(rng.length(Math.max(1, maxLength / 4)))],
    [1, () => `https://${drawn(rng, 'abcdefghij.-/?=&%#:', rng.length(maxLength))}`],
    [1, () => `${drawn(rng, 'abcxyz.', rng.length(40))}@${drawn(rng, 'abcxyz.-', rng.length(40))}.com`],
    [2, () => drawn(rng, AWKWARD_CHARS, rng.length(Math.min(maxLength, 64)))],
    [2, () => Array.from({ length: rng.length(Math.min(maxLength, 64)) }, () => anyCodePoint(rng)).join('')],
  ])();
}

/** Whitespace between tokens: mostly one space, sometimes runs, line breaks or other Unicode spaces. */
function separator(rng: Rng): string {
  return rng.weighted<() => string>([
    [20, () => ' '],
    [2, () => drawn(rng, ' \t\n\r', rng.length(8))],
    [1, () => drawn(rng, ' \t\n\r\u000b\f\u00a0\u2028\u3000', rng.length(2000))],
    [1, () => ''],
  ])();
}

/** Markup-ish text: tags, entities, SSML, Markdown, JSON. */
function markup(rng: Rng): string {
  const word = rng.pick(WORDS);
  return rng.pick([
    `<speak>${word}<break time="${digits(rng, 4)}ms"/></speak>`,
    `<b>${word}</b>`,
    `<${word}`,
    `&amp;${word}&lt;&#${digits(rng, rng.int(1, 8))};&#x${drawn(rng, '0123456789abcdef', rng.int(1, 8))};`,
    `**${word}** _${word}_ \`${word}\``,
    `# ${word}\n\n- ${word}\n- ${word}\n\n${'-'.repeat(rng.length(80))}`,
    `[${word}](https://example.com/${word})`,
    `{"${word}": [${digits(rng, 3)}, null, true]}`,
    `${word}\\n${word}\\t${word}\\u0000`,
  ]);
}

/** Text built from scratch: tokens of awkward shapes between separators, up to about `maxLength` characters. */
export function generateText(rng: Rng, maxLength: number): string {
  const target = rng.length(maxLength);
  let text = '';
  while (text.length < target) {
    text += rng.chance(0.1) ? markup(rng) : rng.chance(0.5) ? rng.pick(WORDS) : awkwardToken(rng, Math.max(1, target - text.length));
    text += separator(rng);
  }
  return text.slice(0, maxLength);
}

/**
 * One mutation of `text`: characters replaced, inserted or deleted, a stretch repeated into a run, a token of an
 * awkward shape or a stretch of another seed spliced in, or the case changed. Code-unit positions: a surrogate
 * pair may be split. The result is never longer than `maxLength`.
 */
export function mutateText(rng: Rng, text: string, seeds: readonly string[], maxLength: number): string {
  const [start, end] = span(rng, text.length, 32);
  const result = rng.weighted<() => string>([
    [2, () => text.slice(0, start) + drawn(rng, rng.chance(0.5) ? ASCII_PUNCTUATION : AWKWARD_CHARS, end - start) + text.slice(end)],
    [2, () => text.slice(0, start) + text.slice(end)],
    [3, () => text.slice(0, end) + text.slice(start, end).repeat(rng.length(Math.floor(maxLength / Math.max(1, end - start)))) + text.slice(end)],
    [3, () => text.slice(0, start) + awkwardToken(rng, rng.length(maxLength)) + text.slice(start)],
    [2, () => text.slice(0, start) + spliced(rng, seeds) + text.slice(rng.chance(0.5) ? start : end)],
    [1, () => text.slice(0, start) + (rng.chance(0.5) ? text.slice(start, end).toUpperCase() : text.slice(start, end).toLowerCase()) + text.slice(end)],
  ])();
  return result.slice(0, maxLength);
}

function spliced(rng: Rng, seeds: readonly string[]): string {
  if (seeds.length === 0) return '';
  const donor = rng.pick(seeds);
  const [from, to] = span(rng, donor.length);
  return donor.slice(from, to);
}
