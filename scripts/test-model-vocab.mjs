// Synthetic vocabularies for the test models: a SentencePiece unigram one (llama.cpp's UGM tokenizer, "t5") for
// Pocket TTS and a byte-level BPE one (llama.cpp's "gpt2") for Qwen3-TTS, Qwen3-ASR and Voxtral, both over the same
// English words so that ordinary sentences tokenize into whole words. make-parakeet-test-model.mjs builds its
// vocabularies on the SentencePiece one. Changing them changes the models' bytes (the FORMAT_VERSION of
// make-tts-test-model.mjs, make-asr-test-model.mjs and make-parakeet-test-model.mjs).

// llama.cpp's token types (llama_token_type)
export const TOKEN_NORMAL = 1;
const TOKEN_UNKNOWN = 2;
export const TOKEN_CONTROL = 3;
export const TOKEN_USER_DEFINED = 4;
export const TOKEN_UNUSED = 5;

// ---- SentencePiece unigram ----

const SPACE = '\u2581'; // SentencePiece's escaped space
const WORDS = (
  'the of and to a in is it you that he was for on are with as I his they be at one have this from or had by ' +
  'word but what some we can out other were all there when up use your how said an each she which do their time ' +
  'if will way about many then them write would like so these her long make thing see him two has look more day ' +
  'could go come did number sound no most people my over know water than call first who may down side been now ' +
  'find hello world test speech voice audio model'
).split(' ');
const LETTERS = 'abcdefghijklmnopqrstuvwxyz';
const CHARS = `${LETTERS}${LETTERS.toUpperCase()}0123456789.,!?;:'"-()`;

/**
 * Pieces with unigram log-probabilities: <unk>, <s>, </s>, the bare space piece (so punctuation after a space
 * tokenizes as [space, mark], which the Pocket TTS helper relies on), single characters, whole words with a
 * leading space, then (to reach `size`) two- and three-letter pieces. No piece joins a space and punctuation.
 * @param {number} size
 */
export function sentencePieces(size) {
  /** @type {[piece: string, score: number, type: number][]} */
  const pieces = [
    ['<unk>', 0, TOKEN_UNKNOWN],
    ['<s>', 0, TOKEN_CONTROL],
    ['</s>', 0, TOKEN_CONTROL],
    [SPACE, -3, TOKEN_NORMAL],
  ];
  for (const ch of CHARS) pieces.push([ch, -6, TOKEN_NORMAL]);
  for (const word of WORDS) pieces.push([SPACE + word, -4 - word.length / 10, TOKEN_NORMAL]);
  const seen = new Set(pieces.map((p) => p[0]));
  const fillers = function* () {
    for (const a of LETTERS) for (const b of LETTERS) yield SPACE + a + b;
    for (const a of LETTERS) for (const b of LETTERS) yield a + b;
    for (const a of LETTERS) for (const b of LETTERS) for (const c of LETTERS) yield SPACE + a + b + c;
  };
  for (const piece of fillers()) {
    if (pieces.length >= size) break;
    if (seen.has(piece)) continue;
    seen.add(piece);
    pieces.push([piece, -8 - pieces.length / 1000, TOKEN_NORMAL]);
  }
  return pieces;
}

// ---- byte-level BPE ----

/**
 * GPT-2's byte alphabet: every byte is one printable character, the printable Latin-1 ones standing for
 * themselves and the rest (controls, space, soft hyphen) moved to U+0100 upwards in byte order, so a space is
 * "Ġ" and a newline "Ċ". Ordinary tokens are strings over this alphabet.
 */
function byteAlphabet() {
  const chars = [];
  let next = 0x100;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    chars.push(String.fromCodePoint(printable ? b : next++));
  }
  return chars;
}

/** The whole words among bpeTokens' tokens: "assistant", then the English words with a leading space ("Ġ"). */
export function bpeWords() {
  const space = byteAlphabet()[0x20];
  return ['assistant', ...WORDS.map((w) => space + w)];
}

/**
 * Ordinary tokens and merges: the 256 bytes (so any text tokenizes), then whole words built one character at a
 * time (each merge joins a word's prefix and its next character, so every intermediate is itself a token and
 * BPE never strands a symbol outside the vocabulary). "assistant" goes first, so its merges rank highest and
 * the chat wrap's role line is three tokens, as the helper's slicing assumes; the other words carry a leading
 * space ("Ġ"). Unreachable fillers (letter runs without merges) pad the list to `size`.
 * @param {number} size
 */
export function bpeTokens(size) {
  const alphabet = byteAlphabet();
  const space = alphabet[0x20];
  const tokens = [...alphabet];
  const seen = new Set(tokens);
  const merges = [];
  for (const word of bpeWords()) {
    const chars = [...word];
    let prefix = chars[0];
    for (const ch of chars.slice(1)) {
      const merged = prefix + ch;
      if (!seen.has(merged)) {
        merges.push(`${prefix} ${ch}`);
        tokens.push(merged);
        seen.add(merged);
      }
      prefix = merged;
    }
  }
  const fillers = function* () {
    for (const a of LETTERS) for (const b of LETTERS) yield* [space + a + b, a + b];
    for (const a of LETTERS) for (const b of LETTERS) for (const c of LETTERS) yield* [space + a + b + c, a + b + c];
    for (const a of LETTERS) for (const b of LETTERS) for (const c of LETTERS) for (const e of LETTERS) yield a + b + c + e;
  };
  for (const piece of fillers()) {
    if (tokens.length >= size) break;
    if (seen.has(piece)) continue;
    seen.add(piece);
    tokens.push(piece);
  }
  if (tokens.length < size) throw new Error(`vocabulary of ${size} is too large for the filler pieces`);
  return { tokens, merges };
}
