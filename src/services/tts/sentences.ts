/**
 * Splits text to speak into pieces at sentence boundaries, so a stream can start after the first sentence and
 * batching engines get several short requests instead of one long one. Nothing is dropped: joining the pieces
 * with single spaces gives the input back with its whitespace runs collapsed.
 */

/** A sentence longer than this is cut further, at a clause boundary or a space (engines degrade on long inputs). */
export const MAX_PIECE_CHARS = 400;

// a run of . ! ? … (with closing quotes or brackets) followed by whitespace, or a line break
const SENTENCE_END = /(?<=[.!?…]+["'”’)\]]*)\s+|\s*\n\s*/u;
const CLAUSE_END = /(?<=[,;:—])\s+/u;

/**
 * Text that arrives in pieces (Wyoming's streaming synthesis), cut after its last sentence end: what can be spoken
 * now, and the rest that waits for more.
 */
export function completeSentences(text: string): { complete: string; rest: string } {
  let end = 0;
  for (const match of text.matchAll(new RegExp(SENTENCE_END.source, 'gu'))) end = (match.index ?? 0) + match[0].length;
  return { complete: text.slice(0, end), rest: text.slice(end) };
}

export function splitSentences(text: string, maxChars = MAX_PIECE_CHARS): string[] {
  return text
    .split(SENTENCE_END)
    .map((s) => s.replace(/\s+/g, ' ').trim())
    .filter(Boolean)
    .flatMap((sentence) => cut(sentence, maxChars));
}

/** Cuts an over-long sentence at its clause boundaries, then at spaces, then anywhere. */
function cut(sentence: string, maxChars: number): string[] {
  if (sentence.length <= maxChars) return [sentence];
  const pieces: string[] = [];
  let current = '';
  for (const part of sentence.split(CLAUSE_END).flatMap((clause) => (clause.length <= maxChars ? [clause] : clause.split(' ')))) {
    for (const chunk of part.length <= maxChars ? [part] : (part.match(new RegExp(`.{1,${maxChars}}`, 'gsu')) ?? [])) {
      if (current && current.length + 1 + chunk.length > maxChars) {
        pieces.push(current);
        current = chunk;
      } else {
        current = current ? `${current} ${chunk}` : chunk;
      }
    }
  }
  if (current) pieces.push(current);
  return pieces;
}
