/**
 * Live transcription on a model with no incremental decoder (Whisper's 30 s windows, Parakeet's whole-clip
 * normalisation and attention): the turn's audio is re-decoded
 * every `delayMs` of new audio, and a word goes out once two passes in a row agree on it and on every word
 * before it (local agreement), so deltas are never retracted. A session behind real time (more audio already
 * waiting) skips the passes in between and decodes once it has caught up. `finish` decodes once more and sends the words
 * past those already sent. The window is bounded: past its window (24 s unless the engine says), the segments before the last one are
 * sent as final, cut from the window, and their text becomes the prompt (committed context) of later passes
 * (on engines that take one). An engine whose pass is one segment (audio language models time no sentences) may
 * have the whole window committed once it is past its length instead: the next audio starts a new window, so a word
 * spoken across that cut is heard in two halves.
 */
import type { StreamingOptions, SttModel, SttStreamingSession, TranscriptionResult } from './types.js';

/** How often the window is decoded when the server sets no --realtime-transcription-delay-ms. */
export const DEFAULT_DECODE_INTERVAL_MS = 1000;
/** Whisper decodes 30 s windows; the live window stays below that unless the engine asks for less. */
const DEFAULT_WINDOW_SECONDS = 24;
/** Characters of committed text given to later passes as their prompt. */
const CONTEXT_CHARS = 200;

function words(text: string): string[] {
  return text.trim().split(/\s+/).filter(Boolean);
}

export class RedecodingStreamingSession implements SttStreamingSession {
  private chunks: Float32Array[] = [];
  private windowSamples = 0;
  private sinceDecode = 0;
  /** Words of the current window already sent. */
  private sentInWindow = 0;
  /** The previous pass's words of the window, for agreement. */
  private previous: string[] = [];
  private transcript = '';
  private readonly interval: number;

  /**
   * `windowSeconds`: audio past which finished segments are committed and cut (a re-decode costs what it holds).
   * `commitWhole`: for engines whose pass is one segment (audio language models time no sentences), the whole window
   * is committed past that length instead, and the next audio starts a new window.
   */
  constructor(
    private readonly model: SttModel,
    private readonly options: StreamingOptions,
    private readonly windowSeconds = DEFAULT_WINDOW_SECONDS,
    private readonly cut: { commitWhole: boolean } = { commitWhole: false },
  ) {
    this.interval = Math.max(1, Math.round(((options.delayMs ?? DEFAULT_DECODE_INTERVAL_MS) * model.sampleRate) / 1000));
  }

  async feed(samples: Float32Array, signal?: AbortSignal, more = false): Promise<string> {
    if (samples.length > 0) {
      this.chunks.push(samples.slice());
      this.windowSamples += samples.length;
      this.sinceDecode += samples.length;
    }
    if (this.sinceDecode < this.interval || more) return '';
    this.sinceDecode = 0;
    const result = await this.decode(signal);
    let delta = '';
    if (this.windowSamples > this.windowSeconds * this.model.sampleRate) {
      if (this.cut.commitWhole) return this.commitWindow(result);
      if (result.segments.length > 1) delta = this.commitAllButLast(result);
    }
    const current = words(result.text);
    let agreed = 0;
    while (agreed < current.length && agreed < this.previous.length && current[agreed] === this.previous[agreed]) agreed++;
    this.previous = current;
    return delta + this.send(current.slice(0, agreed));
  }

  async finish(signal?: AbortSignal): Promise<{ delta: string; transcript: string }> {
    const delta = this.windowSamples > 0 ? this.send(words((await this.decode(signal)).text)) : '';
    const transcript = this.transcript;
    await this.reset();
    return { delta, transcript };
  }

  async reset(): Promise<void> {
    this.chunks = [];
    this.windowSamples = 0;
    this.sinceDecode = 0;
    this.sentInWindow = 0;
    this.previous = [];
    this.transcript = '';
  }

  async close(): Promise<void> {
    await this.reset();
  }

  private window(): Float32Array {
    if (this.chunks.length !== 1) {
      const joined = new Float32Array(this.windowSamples);
      let at = 0;
      for (const chunk of this.chunks) {
        joined.set(chunk, at);
        at += chunk.length;
      }
      this.chunks = [joined];
    }
    return this.chunks[0] ?? new Float32Array(0);
  }

  private decode(signal: AbortSignal | undefined): Promise<TranscriptionResult> {
    const prompt = [this.options.prompt, this.transcript.slice(-CONTEXT_CHARS)].filter(Boolean).join(' ') || null;
    // greedy only: a live pass must keep up with the audio, and the next pass decodes the window again anyway
    return this.model.transcribe(this.window(), { language: this.options.language ?? null, prompt, fallback: false, ...(signal ? { signal } : {}) });
  }

  /** Sends the words of `agreed` past those already sent from this window. */
  private send(agreed: string[]): string {
    const fresh = agreed.slice(this.sentInWindow);
    if (fresh.length === 0) return '';
    this.sentInWindow += fresh.length;
    const text = (this.transcript ? ' ' : '') + fresh.join(' ');
    this.transcript += text;
    return text;
  }

  /** Sends the words of the window not yet sent as final and empties it: the next audio starts a new window. */
  private commitWindow(result: TranscriptionResult): string {
    const delta = this.send(words(result.text));
    this.chunks = [];
    this.windowSamples = 0;
    this.sentInWindow = 0;
    this.previous = [];
    return delta;
  }

  /** Sends every segment but the last as final and cuts them from the window. */
  private commitAllButLast(result: TranscriptionResult): string {
    const last = result.segments[result.segments.length - 1] as TranscriptionResult['segments'][number];
    const committed = words(
      result.segments
        .slice(0, -1)
        .map((s) => s.text)
        .join(' '),
    );
    const delta = this.send(committed);
    const cut = Math.min(this.windowSamples, Math.round(last.start * this.model.sampleRate));
    this.chunks = [this.window().slice(cut)];
    this.windowSamples -= cut;
    // words sent beyond the committed segments belong to the part that stays in the window
    this.sentInWindow = Math.max(0, this.sentInWindow - committed.length);
    this.previous = [];
    return delta;
  }
}
