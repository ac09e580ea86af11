/**
 * Ways to make new inputs from seeds: byte mutations (for bodies, uploads and text seen as UTF-8), text mutations
 * (which may split surrogate pairs: lone surrogates are wanted), generators of structured text from scratch:
 * the shapes that break text front ends (runs of punctuation, long tokens, numbers, abbreviations, Unicode,
 * control characters, markup), and JSON mutations (request bodies, realtime events) that keep the document
 * well-formed but change its types, keys, nesting and values, with the text written out sometimes bent.
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
    const copies = rng.length(Math.floor(maxLength / Math.max(1, piece.length)));
    // one array filled in place: thousands of copies as arguments would overflow the stack
    const run = new Uint8Array(piece.length * copies);
    for (let i = 0; i < copies; i++) run.set(piece, i * piece.length);
    return concatBytes(b.subarray(0, end), run, b.subarray(end));
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

// ---- JSON ----

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Keys a JSON mutation may add, and values worth trying for some of them (valid ones and near misses). */
export interface JsonVocabulary {
  keys: readonly string[];
  values: Readonly<Record<string, readonly Json[]>>;
}

/** Numbers on the edges: zero's signs, integer limits, float limits, fractions where integers are expected. */
const EDGE_NUMBERS = [
  0,
  -0,
  1,
  -1,
  0.5,
  2,
  3.999,
  255,
  256,
  65535,
  2 ** 31 - 1,
  2 ** 31,
  2 ** 32 - 2,
  2 ** 32,
  2 ** 53,
  2 ** 53 + 2,
  -(2 ** 63),
  1e21,
  1e308,
  -1e308,
  5e-324,
];
/** Strings that other types are often parsed from. */
const EDGE_STRINGS = ['', ' ', '0', '-1', '1e999', 'NaN', 'Infinity', 'null', 'true', 'false', 'undefined', '[]', '{}', '__proto__', 'constructor'];

/** A JSON value of any type, often an awkward one; nests up to `depth` more levels. */
export function awkwardJson(rng: Rng, depth = 3): Json {
  return rng.weighted<() => Json>([
    [3, () => rng.pick(EDGE_NUMBERS)],
    [1, () => (rng.float() - 0.5) * 10 ** rng.int(-5, 12)],
    [2, () => rng.pick(EDGE_STRINGS)],
    [3, () => awkwardToken(rng, 64)],
    [1, () => generateText(rng, 2000)],
    [1, () => rng.pick(['x', '\u0000', 'é', '😀']).repeat(rng.length(100_000))],
    [2, () => rng.pick([true, false, null])],
    [depth > 0 ? 2 : 0, () => Array.from({ length: rng.length(8) - 1 }, () => awkwardJson(rng, depth - 1))],
    [depth > 0 ? 2 : 0, () => Object.fromEntries(Array.from({ length: rng.length(6) - 1 }, () => [awkwardToken(rng, 16), awkwardJson(rng, depth - 1)]))],
    // deep nesting (deeper still as text, in jsonText: JSON.stringify and structuredClone recurse here too)
    [1, () => nested(rng.length(500), rng.chance(0.5) ? '[]' : '{}')],
  ])();
}

function nested(levels: number, kind: '[]' | '{}'): Json {
  let value: Json = null;
  for (let i = 0; i < levels; i++) value = kind === '[]' ? [value] : { a: value };
  return value;
}

/** A place in a document: the container and the key or index that holds the value (no container: the root). */
interface JsonSlot {
  parent: Json[] | { [key: string]: Json } | null;
  key: string | number;
  value: Json;
}

/** The document's places, breadth first, at most `max` of them (a deep document has many). */
function slots(root: Json, max = 2000): JsonSlot[] {
  const found: JsonSlot[] = [{ parent: null, key: '', value: root }];
  for (let i = 0; i < found.length && found.length < max; i++) {
    const { value } = found[i]!;
    if (Array.isArray(value)) value.forEach((item, index) => found.push({ parent: value, key: index, value: item }));
    else if (value !== null && typeof value === 'object') for (const [key, item] of Object.entries(value)) found.push({ parent: value, key, value: item });
  }
  return found.slice(0, max);
}

/**
 * One mutation of a JSON document (the input is not changed): a value replaced by one the vocabulary has for its
 * key, an awkward value or a piece of another document; a key added, renamed or deleted; a value wrapped in an
 * array or object, or an element repeated.
 */
export function mutateJson(rng: Rng, document: Json, vocabulary: JsonVocabulary, donors: readonly Json[]): Json {
  const root = structuredClone(document);
  const all = slots(root);
  const slot = rng.pick(all.length > 1 && rng.chance(0.9) ? all.slice(1) : all);
  const valueFor = (key: string | number): Json => {
    const known = typeof key === 'string' && Object.hasOwn(vocabulary.values, key) ? vocabulary.values[key] : undefined;
    if (known && rng.chance(0.6)) return structuredClone(rng.pick(known));
    if (donors.length > 0 && rng.chance(0.15)) return structuredClone(rng.pick(slots(rng.pick(donors))).value);
    return awkwardJson(rng);
  };
  const replaced = (value: Json): Json => {
    if (!slot.parent) return value;
    (slot.parent as Record<string | number, Json>)[slot.key] = value;
    return root;
  };
  const objects = all.filter(
    (s): s is JsonSlot & { value: { [key: string]: Json } } => s.value !== null && typeof s.value === 'object' && !Array.isArray(s.value),
  );
  return rng.weighted<() => Json>([
    [5, () => replaced(valueFor(slot.key))],
    [
      4,
      () => {
        const target = objects.length > 0 ? rng.pick(objects).value : null;
        if (!target) return replaced(valueFor(slot.key));
        const key = rng.chance(0.8) ? rng.pick(vocabulary.keys) : awkwardToken(rng, 24);
        target[key] = valueFor(key);
        return root;
      },
    ],
    [
      2,
      () => {
        if (Array.isArray(slot.parent)) slot.parent.splice(slot.key as number, 1);
        else if (slot.parent) delete slot.parent[slot.key as string];
        return slot.parent ? root : {};
      },
    ],
    [
      1,
      () => {
        if (!slot.parent || Array.isArray(slot.parent)) return replaced(valueFor(slot.key));
        delete slot.parent[slot.key as string];
        const renamed = rng.pick<() => string>([
          () => rng.pick(vocabulary.keys),
          () => String(slot.key).toUpperCase(),
          () => ` ${String(slot.key)}`,
          () => `${String(slot.key)}\u0000`,
        ])();
        slot.parent[renamed] = slot.value;
        return root;
      },
    ],
    [1, () => replaced(rng.chance(0.5) ? [slot.value] : { [rng.pick(vocabulary.keys)]: slot.value })],
    [1, () => (Array.isArray(slot.value) ? replaced([...slot.value, ...slot.value]) : replaced(valueFor(slot.key)))],
  ])();
}

/**
 * A document as text: mostly JSON.stringify's, sometimes bent where parsers differ: a number beyond double
 * precision or range, a key repeated, a byte order mark, trailing text, whitespace, nesting deeper than a
 * recursive parser or validator survives, or the text cut short.
 */
export function jsonText(rng: Rng, document: Json): string {
  const text = JSON.stringify(document);
  if (rng.chance(0.8)) return text;
  return rng.weighted<() => string>([
    [
      3,
      () =>
        text.replace(
          /-?\d+(\.\d+)?([eE][+-]?\d+)?/,
          rng.pick(['1e999', '-1e999', '-0', '123456789012345678901234567890', '0.1e-400', '1E+400', '01', '1.', '.5', '0x10']),
        ),
    ],
    [
      2,
      () =>
        text.startsWith('{')
          ? `{${JSON.stringify(rng.pick(Object.keys(document ?? {}).concat('model')))}:${JSON.stringify(awkwardJson(rng, 1))},${text.slice(1)}`
          : text,
    ],
    [1, () => `\ufeff${text}`],
    [1, () => `${text}${rng.pick(['\n', ' ', ',', '}', 'x', '\u0000', text])}`],
    [1, () => text.replace(/[,:]/g, (sep) => `${rng.pick(['', ' ', '\n', '\t', '\r\n'])}${sep}`)],
    [1, () => text.slice(0, rng.below(text.length + 1))],
    [
      1,
      () => {
        const levels = rng.length(100_000);
        return rng.chance(0.5) ? `${'['.repeat(levels)}${text}${']'.repeat(levels)}` : `${'{"a":'.repeat(levels)}${text}${'}'.repeat(levels)}`;
      },
    ],
  ])();
}
