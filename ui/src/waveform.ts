/** Waveforms drawn by hand on a canvas: peaks of decoded audio, and the live level of a microphone. */

/** Min and max of each of `columns` slices of the first channel. */
export function peaks(samples: Float32Array, columns: number): Float32Array {
  const out = new Float32Array(columns * 2);
  const step = samples.length / columns;
  for (let column = 0; column < columns; column++) {
    let min = 0;
    let max = 0;
    const end = Math.min(samples.length, Math.floor((column + 1) * step));
    for (let i = Math.floor(column * step); i < end; i++) {
      const sample = samples[i]!;
      if (sample < min) min = sample;
      else if (sample > max) max = sample;
    }
    out[column * 2] = min;
    out[column * 2 + 1] = max;
  }
  return out;
}

/** The first channel of an encoded file, decoded by the browser (any format it plays). */
export async function decodeFirstChannel(blob: Blob): Promise<{ samples: Float32Array; duration: number }> {
  // an OfflineAudioContext decodes without asking for the audio device (no autoplay rules apply)
  const context = new OfflineAudioContext(1, 1, 44100);
  const buffer = await context.decodeAudioData(await blob.arrayBuffer());
  return { samples: buffer.getChannelData(0), duration: buffer.duration };
}

/** The colours of the page's theme, read from its custom properties. */
function themeColour(canvas: HTMLCanvasElement, name: string): string {
  return getComputedStyle(canvas).getPropertyValue(name).trim() || '#888';
}

/** Sizes the canvas's backing store to its CSS box at the screen's pixel ratio; returns its CSS width and height. */
function fitCanvas(canvas: HTMLCanvasElement): { width: number; height: number; context: CanvasRenderingContext2D } {
  const ratio = window.devicePixelRatio || 1;
  const { width, height } = canvas.getBoundingClientRect();
  canvas.width = Math.max(1, Math.round(width * ratio));
  canvas.height = Math.max(1, Math.round(height * ratio));
  const context = canvas.getContext('2d')!;
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  return { width, height, context };
}

/** Draws `samples` as a mirrored peak waveform, the part before `progress` (0..1) in the accent colour. */
export function drawWaveform(canvas: HTMLCanvasElement, samples: Float32Array, progress: number): void {
  const { width, height, context } = fitCanvas(canvas);
  const columns = Math.max(1, Math.floor(width / 2));
  const bars = peaks(samples, columns);
  const played = themeColour(canvas, '--accent');
  const rest = themeColour(canvas, '--wave');
  const middle = height / 2;
  context.clearRect(0, 0, width, height);
  for (let column = 0; column < columns; column++) {
    const low = bars[column * 2]!;
    const high = bars[column * 2 + 1]!;
    context.fillStyle = column / columns < progress ? played : rest;
    const top = middle - Math.max(high, 0.01) * middle;
    context.fillRect(column * 2, top, 1.5, Math.max(1, (high - low) * middle));
  }
}

/** Draws the latest time-domain window of a live input as a line. */
export function drawLiveWave(canvas: HTMLCanvasElement, window: Float32Array): void {
  const { width, height, context } = fitCanvas(canvas);
  context.clearRect(0, 0, width, height);
  context.strokeStyle = themeColour(canvas, '--accent');
  context.lineWidth = 1.5;
  context.beginPath();
  for (let i = 0; i < window.length; i++) {
    const x = (i / (window.length - 1)) * width;
    const y = height / 2 - window[i]! * (height / 2);
    if (i === 0) context.moveTo(x, y);
    else context.lineTo(x, y);
  }
  context.stroke();
}

/** Root-mean-square level of a window, 0..1. */
export function rmsLevel(window: Float32Array): number {
  let sum = 0;
  for (const sample of window) sum += sample * sample;
  return Math.sqrt(sum / Math.max(1, window.length));
}
