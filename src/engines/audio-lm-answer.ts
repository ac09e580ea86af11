/**
 * What of an audio language model's answer is transcript. Qwen3-ASR answers `language English<asr_text>` before the
 * transcript (`language None<asr_text>` when it hears no speech), and reasoning models wrap thoughts in
 * `<think>...</think>`: neither belongs in a transcript. The answer arrives a token at a time, so text that may still
 * turn out to be a preamble or a tag is held back until it is known, and nothing sent is ever taken back.
 */

const ANSWER_START = '<asr_text>';
const THINK_OPEN = '<think>';
const THINK_CLOSE = '</think>';
/** Qwen3-ASR's preamble: `language <name>` up to the answer marker. */
const PREAMBLE = /^language ([^<\n]{0,40})<asr_text>/;
/** A preamble still being written: `language ...` without its marker yet, or a start of the word `language`. */
const PREAMBLE_SO_FAR = /^(l(a(n(g(u(a(g(e( [^<\n]{0,40}(<(a(s(r(_(t(e(x(t)?)?)?)?)?)?)?)?)?)?)?)?)?)?)?)?)?)?$/;

/** The length of the longest suffix of `text` that starts `tag` (a tag whose end has not arrived yet). */
function partialTagAt(text: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, text.length); n > 0; n--) if (tag.startsWith(text.slice(-n))) return n;
  return 0;
}

export class AnswerFilter {
  /** Text held back: it may still be a preamble or a tag. */
  private held = '';
  /** Whether a preamble is still possible: only a model that writes one (Qwen3-ASR) has its text held for it. */
  private preambleSettled: boolean;
  private thinking = false;
  /** The language the preamble named (`English`), or null when it named none. */
  language: string | null = null;

  constructor({ preamble }: { preamble: boolean }) {
    this.preambleSettled = !preamble;
  }

  /** Takes the answer's next piece; returns what of the answer so far is now known to be transcript. */
  push(piece: string): string {
    this.held += piece;
    if (!this.preambleSettled) {
      const match = PREAMBLE.exec(this.held);
      if (match) {
        const name = (match[1] as string).trim();
        this.language = name === '' || name.toLowerCase() === 'none' ? null : name;
        this.held = this.held.slice(match[0].length);
        this.preambleSettled = true;
      } else if (PREAMBLE_SO_FAR.test(this.held)) {
        return '';
      } else {
        this.preambleSettled = true;
      }
    }
    return this.release(false);
  }

  /** The answer ended: whatever is still held, less an unfinished thought or preamble (an answer cut short). */
  end(): string {
    if (!this.preambleSettled && this.held.startsWith('language ')) this.held = '';
    this.preambleSettled = true;
    return this.release(true);
  }

  private release(final: boolean): string {
    let out = '';
    for (;;) {
      if (this.thinking) {
        const close = this.held.indexOf(THINK_CLOSE);
        if (close < 0) {
          this.held = final ? '' : this.held.slice(this.held.length - partialTagAt(this.held, THINK_CLOSE));
          return out;
        }
        this.held = this.held.slice(close + THINK_CLOSE.length);
        this.thinking = false;
        continue;
      }
      const open = this.held.indexOf(THINK_OPEN);
      if (open >= 0) {
        out += this.held.slice(0, open);
        this.held = this.held.slice(open + THINK_OPEN.length);
        this.thinking = true;
        continue;
      }
      const keep = final ? 0 : Math.max(partialTagAt(this.held, THINK_OPEN), partialTagAt(this.held, ANSWER_START));
      out += this.held.slice(0, this.held.length - keep);
      this.held = this.held.slice(this.held.length - keep);
      return out.split(ANSWER_START).join('');
    }
  }
}
