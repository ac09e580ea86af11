/**
 * Realtime audio to the rates engines want: clients of WS /v1/realtime send PCM16 at a declared rate in chunks; each
 * stream gets a StreamResampler per target rate (the model's, 16 kHz for the VAD). The filter state carries over
 * between chunks, so chunk boundaries leave no clicks or gaps and the output does not depend on how the input was
 * chunked; flush() at the end of a turn or stream returns the few milliseconds the filter still holds.
 *
 * The filter: libswresample's polyphase filter with 64 taps and the cutoff at 0.91 of the lower Nyquist rate (flat
 * to about 0.81 of it, at least 90 dB of attenuation beyond about 1.03 of it); about 2 ms of delay. Equal rates
 * are a plain copy.
 */
import type { NativeResampler } from '../../native/addon.js';
import { loadNative } from '../../native/load.js';

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * Little-endian PCM16 bytes as float32 in [-1, 1) (sample / 32768). Stateless: an odd trailing byte is ignored;
 * a stream whose messages may split a sample goes through `StreamResampler.processPcm16`, which keeps it.
 */
export function pcm16ToFloat(bytes: Uint8Array): Float32Array {
  const n = bytes.byteLength >> 1;
  const out = new Float32Array(n);
  const view = new DataView(bytes.buffer, bytes.byteOffset, n * 2);
  for (let i = 0; i < n; i++) out[i] = view.getInt16(i * 2, true) / 32768;
  return out;
}

/** Whole little-endian PCM16 samples of `bytes` (even length) as an Int16Array, without a copy where possible. */
function pcm16View(bytes: Uint8Array): Int16Array {
  const n = bytes.byteLength >> 1;
  if (LITTLE_ENDIAN && bytes.byteOffset % 2 === 0) return new Int16Array(bytes.buffer, bytes.byteOffset, n);
  const out = new Int16Array(n);
  const view = new DataView(bytes.buffer, bytes.byteOffset, n * 2);
  for (let i = 0; i < n; i++) out[i] = view.getInt16(i * 2, true);
  return out;
}

export class StreamResampler {
  readonly inputRate: number;
  readonly outputRate: number;
  readonly #native: NativeResampler;
  /** The first byte of a PCM16 sample split between two processPcm16 calls. */
  #pendingByte: number | undefined;

  /** Throws a NativeError coded `invalid_argument` unless both rates are integers from 1000 to 384000 Hz. */
  constructor(inputRate: number, outputRate: number) {
    this.#native = new (loadNative().Resampler)({ inputRate, outputRate });
    this.inputRate = inputRate;
    this.outputRate = outputRate;
  }

  /**
   * The output that this chunk completes (float32 in [-1, 1], Int16Array scaled by 1/32768; NaN and infinities
   * count as 0). Its length varies by a sample or so from chunk to chunk; over a stream it totals
   * round(n * outputRate / inputRate) with flush(). Synchronous: microseconds for a 100 ms chunk.
   */
  process(chunk: Float32Array | Int16Array): Float32Array {
    return this.#native.process(chunk);
  }

  /** Little-endian PCM16 bytes as they come off the wire; a sample split across calls is joined. */
  processPcm16(bytes: Uint8Array): Float32Array {
    if (bytes.byteLength === 0) return new Float32Array(0);
    let data = bytes;
    if (this.#pendingByte !== undefined) {
      data = new Uint8Array(bytes.byteLength + 1);
      data[0] = this.#pendingByte;
      data.set(bytes, 1);
      this.#pendingByte = undefined;
    }
    if (data.byteLength % 2 === 1) {
      this.#pendingByte = data[data.byteLength - 1];
      data = data.subarray(0, data.byteLength - 1);
    }
    return this.#native.process(pcm16View(data));
  }

  /**
   * The end of a turn or stream: the output the filter still holds (a few ms of audio). The next process() starts
   * a new stream. A dangling PCM16 byte is dropped.
   */
  flush(): Float32Array {
    this.#pendingByte = undefined;
    return this.#native.flush();
  }

  /** Drops the held input (and a dangling PCM16 byte) without output, e.g. when a client clears its buffer. */
  reset(): void {
    this.#pendingByte = undefined;
    this.#native.reset();
  }
}
