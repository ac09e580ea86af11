/**
 * Renderings of a transcription result in the vendor's response formats (docs/api.md, "POST
 * /v1/audio/transcriptions"): json, text, srt, vtt, verbose_json and ndjson, and the records of a streamed one.
 */
import type { TranscriptionResult, TranscriptionSegment } from '../engines/types.js';
import { languageName } from '../languages.js';

export const TRANSCRIPT_FORMATS = ['json', 'text', 'srt', 'vtt', 'verbose_json', 'diarized_json', 'ndjson'] as const;
export type TranscriptFormat = (typeof TRANSCRIPT_FORMATS)[number];

export interface RenderOptions {
  task: 'transcribe' | 'translate';
  /** `verbose=true` (seed): json carries language, duration and segments too. */
  verbose: boolean;
  words: boolean;
  segments: boolean;
}

const PLAIN_TEXT = 'text/plain; charset=utf-8';

/** The vendor's usage block of a transcription: the seconds of audio, rounded up. */
export function transcriptUsage(result: TranscriptionResult): { type: 'duration'; seconds: number } {
  return { type: 'duration', seconds: Math.ceil(result.duration) };
}

/** The vendor's ten verbose_json segment fields, and the speaker when speakers were asked for. */
function vendorSegment(segment: TranscriptionSegment): Record<string, unknown> {
  return {
    id: segment.id,
    seek: Math.floor(segment.start * 100),
    start: segment.start,
    end: segment.end,
    text: segment.text,
    tokens: segment.tokens,
    temperature: segment.temperature,
    avg_logprob: segment.avgLogprob,
    compression_ratio: segment.compressionRatio,
    no_speech_prob: segment.noSpeechProb,
    ...withSpeaker(segment),
  };
}

function withSpeaker(segment: TranscriptionSegment): { speaker?: string } {
  return segment.speaker === undefined ? {} : { speaker: segment.speaker };
}

/** A segment of diarized_json, and of the vendor's stream event of the same name. */
export function diarizedSegment(segment: TranscriptionSegment): Record<string, unknown> {
  return {
    type: 'transcript.text.segment',
    id: `seg_${segment.id}`,
    start: segment.start,
    end: segment.end,
    text: segment.text,
    speaker: segment.speaker,
  };
}

/** A cue's text: the speaker as a WebVTT voice (`<v A>`) or an SRT prefix (`A: `). */
function cueText(segment: TranscriptionSegment, format: 'srt' | 'vtt'): string {
  const text = segment.text.trim();
  if (segment.speaker === undefined) return text;
  return format === 'vtt'
    ? `<v ${segment.speaker.replace(/[&<>]/g, (c) => `&${{ '&': 'amp', '<': 'lt', '>': 'gt' }[c]};`)}>${text}`
    : `${segment.speaker}: ${text}`;
}

function timestamp(seconds: number, decimalMark: ',' | '.'): string {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const pad = (n: number, width = 2): string => String(n).padStart(width, '0');
  return `${pad(Math.floor(ms / 3_600_000))}:${pad(Math.floor(ms / 60_000) % 60)}:${pad(Math.floor(ms / 1000) % 60)}${decimalMark}${pad(ms % 1000, 3)}`;
}

/** A segment as one NDJSON line holds it, streamed or whole (docs/api.md). */
export function segmentRecord(segment: TranscriptionSegment, language: string): object {
  return { text: segment.text, start: segment.start, end: segment.end, ...withSpeaker(segment), is_final: true, language };
}

export function renderTranscript(format: TranscriptFormat, result: TranscriptionResult, options: RenderOptions): { body: string; contentType: string } {
  switch (format) {
    case 'json': {
      const body = options.verbose
        ? { text: result.text, language: result.language, duration: result.duration, segments: result.segments.map(vendorSegment) }
        : { text: result.text };
      return { body: JSON.stringify(body), contentType: 'application/json' };
    }
    case 'text':
      return { body: result.text + '\n', contentType: PLAIN_TEXT };
    case 'srt':
      return {
        body: result.segments.map((s, i) => `${i + 1}\n${timestamp(s.start, ',')} --> ${timestamp(s.end, ',')}\n${cueText(s, 'srt')}\n`).join('\n'),
        contentType: PLAIN_TEXT,
      };
    case 'vtt':
      return {
        body: 'WEBVTT\n\n' + result.segments.map((s) => `${timestamp(s.start, '.')} --> ${timestamp(s.end, '.')}\n${cueText(s, 'vtt')}\n`).join('\n'),
        contentType: PLAIN_TEXT,
      };
    case 'verbose_json': {
      const body: Record<string, unknown> = { task: options.task, language: languageName(result.language), duration: result.duration, text: result.text };
      if (options.segments) body.segments = result.segments.map(vendorSegment);
      if (options.words) body.words = result.segments.flatMap((s) => s.words ?? []);
      body.usage = transcriptUsage(result);
      return { body: JSON.stringify(body), contentType: 'application/json' };
    }
    case 'diarized_json': {
      const body = {
        task: options.task,
        duration: result.duration,
        text: result.text,
        segments: result.segments.map(diarizedSegment),
        usage: transcriptUsage(result),
      };
      return { body: JSON.stringify(body), contentType: 'application/json' };
    }
    case 'ndjson':
      return { body: result.segments.map((s) => JSON.stringify(segmentRecord(s, result.language)) + '\n').join(''), contentType: 'application/x-ndjson' };
  }
}
