/**
 * Diarized transcripts over HTTP (docs/api.md, "Diarized transcripts"): the vendor's diarized_json through the
 * official SDK, known speakers, the SSE segment events, speakers in verbose_json, srt and vtt, chunking_strategy,
 * bad input as 400s before any work, a long file and a client that leaves. The dialogue is made of real clips of two
 * people: the LibriVox reader and John F. Kennedy.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type OpenAI from 'openai';
import { toFile } from 'openai';
import { JFK_WAV, SHARED } from '../helpers/paths.js';
import { audioLmTestModel } from '../helpers/audio-lm.js';
import { buildDialogue } from '../helpers/dialogues.js';
import { cancelledJobs, expectEnvelope, sdk, startTestServer, waitForCancelledJob, type TestServer } from '../helpers/server.js';
import { readWavMono, wavBytes } from '../helpers/wav.js';

type Diarized = OpenAI.Audio.Transcriptions.TranscriptionDiarized;

const RATE = 16000;
const SPEECH = path.join(SHARED, 'audio', 'speech');
const reader = (name: string): Float32Array => readWavMono(path.join(SPEECH, `librivox-${name}.wav`)).samples;
const jfk = readWavMono(JFK_WAV).samples;
const seconds = (from: number, to: number): Float32Array => jfk.subarray(from * RATE, to * RATE);

interface Turn {
  speaker: string;
  start: number;
  end: number;
}

/** The reader and Kennedy taking turns, 0.6 s apart: the audio and who speaks when. */
function dialogue(): { wav: Buffer; turns: Turn[]; duration: number } {
  const parts: [Turn['speaker'], Float32Array][] = [
    ['reader', reader('0870').subarray(0, 4.5 * RATE)],
    ['jfk', seconds(0, 4)],
    ['reader', reader('0890').subarray(0, 4.5 * RATE)],
    ['jfk', seconds(4, 8.4)],
  ];
  const gap = 0.6 * RATE;
  const length = parts.reduce((n, [, clip]) => n + clip.length + gap, 0);
  const samples = new Float32Array(length);
  const turns: Turn[] = [];
  let at = 0;
  for (const [speaker, clip] of parts) {
    samples.set(clip, at);
    turns.push({ speaker, start: at / RATE, end: (at + clip.length) / RATE });
    at += clip.length + gap;
  }
  return { wav: wavBytes(samples, RATE), turns, duration: length / RATE };
}

function dataUrl(samples: Float32Array): string {
  return `data:audio/wav;base64,${wavBytes(samples, RATE).toString('base64')}`;
}

/** Known speakers' clips: other words than the dialogue's. */
const READER_CLIP = dataUrl(reader('0920'));
const JFK_CLIP = dataUrl(seconds(8.4, 11));

/** Who speaks most during [start, end] in the reference turns. */
function truth(turns: Turn[], start: number, end: number): string | null {
  const overlap = new Map<string, number>();
  for (const t of turns) overlap.set(t.speaker, (overlap.get(t.speaker) ?? 0) + Math.max(0, Math.min(end, t.end) - Math.max(start, t.start)));
  const [best, most] = [...overlap].reduce((a, b) => (b[1] > a[1] ? b : a), ['', 0]);
  return most > 0 ? best : null;
}

/** Checks that each speaker label stands for one person (by the time its segments overlap that person's turns). */
function assertSpeakersFollowTurns(segments: { start: number; end: number; speaker?: string }[], turns: Turn[], names?: Record<string, string>): void {
  const who = new Map<string, string>();
  let agreed = 0;
  let total = 0;
  for (const s of segments) {
    const person = truth(turns, s.start, s.end);
    if (!person || s.speaker === undefined) continue;
    if (!who.has(s.speaker)) who.set(s.speaker, person);
    total += s.end - s.start;
    if (who.get(s.speaker) === person) agreed += s.end - s.start;
  }
  assert.ok(total > 0, 'segments overlap the turns');
  assert.ok(agreed / total >= 0.9, `segments of one label belong to one person: ${((100 * agreed) / total).toFixed(0)} % of their time`);
  assert.equal(new Set(who.values()).size, new Set(turns.map((t) => t.speaker)).size, `everyone has a label: ${JSON.stringify([...who])}`);
  if (names) for (const [label, person] of who) assert.equal(names[label], person, `label ${label}`);
}

function form(fields: Record<string, string | string[]>, file: Buffer | null, filename = 'dialogue.wav'): FormData {
  const body = new FormData();
  if (file) body.append('file', new Blob([new Uint8Array(file)]), filename);
  for (const [key, value] of Object.entries(fields)) for (const v of [value].flat()) body.append(key, v);
  return body;
}

describe('diarized transcripts over HTTP', () => {
  let server: TestServer;
  const conversation = dialogue();
  const cleanups: (() => Promise<void>)[] = [];
  after(() => Promise.all(cleanups.map((cleanup) => cleanup())));
  const post = (body: FormData, signal?: AbortSignal): Promise<Response> => fetch(`${server.base}/v1/audio/transcriptions`, { method: 'POST', body, signal });
  /** The dialogue's diarized_json through the SDK, with `fields` besides. */
  const diarized = async (fields: Partial<OpenAI.Audio.TranscriptionCreateParamsNonStreaming> = {}): Promise<Diarized> =>
    (await sdk(server.base).audio.transcriptions.create({
      file: await toFile(conversation.wav, 'dialogue.wav'),
      model: 'gpt-4o-transcribe-diarize',
      response_format: 'diarized_json',
      ...fields,
    })) as unknown as Diarized;

  before(async () => {
    // sphinx, the built-in recognizer, times words: segments are split between words where the speaker changes
    server = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) }, { sttModel: 'sphinx', maxAudioSeconds: 600 });
  });

  /** The dialogue's diarized_json, as the first test gets it (the stream is compared with it). */
  let whole: Diarized;

  it('answers the SDK in the vendor diarized_json shape, speakers labelled A, B in order of first speech', async () => {
    const result = await diarized();
    whole = result;
    assert.deepEqual(Object.keys(result), ['task', 'duration', 'text', 'segments', 'usage']);
    assert.equal(result.task, 'transcribe');
    assert.ok(Math.abs(result.duration - conversation.duration) < 0.05);
    assert.deepEqual(result.usage, { type: 'duration', seconds: Math.ceil(result.duration) });
    assert.ok(result.segments.length >= 4, `${result.segments.length} segments`);
    result.segments.forEach((segment, i) => {
      assert.deepEqual(Object.keys(segment), ['type', 'id', 'start', 'end', 'text', 'speaker']);
      assert.equal(segment.type, 'transcript.text.segment');
      assert.equal(segment.id, `seg_${i}`);
      assert.ok(segment.start <= segment.end && segment.end <= result.duration + 0.01);
    });
    assert.equal(result.segments[0]?.speaker, 'A', 'the first to speak is A');
    assert.deepEqual([...new Set(result.segments.map((s) => s.speaker))].sort(), ['A', 'B']);
    assertSpeakersFollowTurns(result.segments, conversation.turns, { A: 'reader', B: 'jfk' });
    assert.equal(result.text.trim(), result.segments.map((s) => s.text.trim()).join(' '));
  });

  it('names known speakers from their reference clips', async () => {
    const result = await diarized({ known_speaker_names: ['Kennedy', 'Reader'], known_speaker_references: [JFK_CLIP, READER_CLIP] });
    assertSpeakersFollowTurns(result.segments, conversation.turns, { Reader: 'reader', Kennedy: 'jfk' });

    // one known speaker: the other keeps a letter
    const one = await diarized({ known_speaker_names: ['Kennedy'], known_speaker_references: [JFK_CLIP] });
    assertSpeakersFollowTurns(one.segments, conversation.turns, { A: 'reader', Kennedy: 'jfk' });
  });

  it('streams transcript.text.segment events with speakers to the SDK, then the whole text', async () => {
    const stream = await sdk(server.base).audio.transcriptions.create({
      file: await toFile(conversation.wav, 'dialogue.wav'),
      model: 'gpt-4o-transcribe-diarize',
      response_format: 'diarized_json',
      stream: true,
    });
    const segments: OpenAI.Audio.Transcriptions.TranscriptionTextSegmentEvent[] = [];
    const types: string[] = [];
    let done = '';
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'transcript.text.segment') segments.push(event);
      if (event.type === 'transcript.text.done') done = event.text;
    }
    assert.equal(types.at(-1), 'transcript.text.done');
    assert.deepEqual(new Set(types.slice(0, -1)), new Set(['transcript.text.segment']), 'segments, not deltas, as the vendor streams speakers');
    segments.forEach((segment, i) => assert.equal(segment.id, `seg_${i}`));
    assertSpeakersFollowTurns(segments, conversation.turns, { A: 'reader', B: 'jfk' });
    assert.equal(done.trim(), segments.map((s) => s.text.trim()).join(' '));

    // the same transcript as whole
    assert.deepEqual(
      whole.segments.map((s) => [s.speaker, s.text]),
      segments.map((s) => [s.speaker, s.text]),
    );
  });

  it('puts speakers on verbose_json segments with diarize=true, split between timed words', async () => {
    const verbose = (await (
      await post(
        form({ model: 'sphinx', response_format: 'verbose_json', diarize: 'true', 'timestamp_granularities[]': ['word', 'segment'] }, conversation.wav),
      )
    ).json()) as { segments: { id: number; start: number; end: number; speaker: string; words?: { start: number; end: number }[] }[] };
    verbose.segments.forEach((segment, i) => assert.equal(segment.id, i));
    assertSpeakersFollowTurns(verbose.segments, conversation.turns, { A: 'reader', B: 'jfk' });
    // a segment split where the speaker changes keeps its own words
    for (const segment of verbose.segments)
      for (const word of segment.words ?? []) assert.ok(word.start >= segment.start - 0.01 && word.end <= segment.end + 0.01);
  });

  it('refuses bad speaker and chunking fields with 400s before any work, and keeps serving', async () => {
    const ask = (fields: Record<string, string | string[]>): Promise<Response> =>
      post(form({ model: 'sphinx', response_format: 'diarized_json', ...fields }, conversation.wav));
    const five = ['a', 'b', 'c', 'd', 'e'];
    await expectEnvelope(
      await ask({ 'known_speaker_names[]': five, 'known_speaker_references[]': five.map(() => JFK_CLIP) }),
      400,
      'invalid_request',
      'known_speaker_references[]',
    );
    await expectEnvelope(await ask({ 'known_speaker_names[]': five }), 400, 'invalid_request', 'known_speaker_names');
    await expectEnvelope(await ask({ 'known_speaker_names[]': 'Kennedy' }), 400, 'invalid_request', 'known_speaker_references');
    await expectEnvelope(await ask({ 'known_speaker_references[]': JFK_CLIP }), 400, 'invalid_request', 'known_speaker_names');
    await expectEnvelope(
      await ask({ 'known_speaker_names[]': ['Kennedy', 'Kennedy'], 'known_speaker_references[]': [JFK_CLIP, READER_CLIP] }),
      400,
      'invalid_request',
      'known_speaker_names',
    );
    const named = (reference: string): Promise<Response> => ask({ 'known_speaker_names[]': 'Kennedy', 'known_speaker_references[]': reference });
    await expectEnvelope(await named(path.join(SPEECH, 'jfk.wav')), 400, 'invalid_request', 'known_speaker_references');
    await expectEnvelope(
      await named(`data:audio/wav;base64,${Buffer.from('not audio at all, just text').toString('base64')}`),
      400,
      'invalid_audio',
      'known_speaker_references',
    );
    await expectEnvelope(await named(dataUrl(seconds(0, 1))), 400, 'invalid_audio', 'known_speaker_references');
    await expectEnvelope(await named(dataUrl(jfk)), 400, 'invalid_audio', 'known_speaker_references');
    await expectEnvelope(await ask({ min_speakers: '3', max_speakers: '2' }), 400, 'invalid_request', 'min_speakers');
    await expectEnvelope(await ask({ max_speakers: '17' }), 400, 'invalid_request', 'max_speakers');
    await expectEnvelope(await ask({ diarize: 'false' }), 400, 'invalid_request', 'diarize');
    await expectEnvelope(await ask({ 'chunking_strategy[type]': 'semantic' }), 400, 'invalid_request', 'chunking_strategy');
    await expectEnvelope(await ask({ 'chunking_strategy[type]': 'server_vad', 'chunking_strategy[threshold]': '1.5' }), 400, 'invalid_request');
    await expectEnvelope(await ask({ 'chunking_strategy[type]': 'server_vad', 'chunking_strategy[frobnicate]': '1' }), 400, 'invalid_request');
    const tooBig = `data:audio/wav;base64,${'A'.repeat(9 * 1024 * 1024)}`;
    await expectEnvelope(await named(tooBig), 413, 'payload_too_large');
    assert.equal((await fetch(`${server.base}/healthz`)).status, 200);
  });

  it('takes chunking_strategy server_vad settings as the SDK sends them', async () => {
    const result = await diarized({ chunking_strategy: { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 200 } });
    assertSpeakersFollowTurns(result.segments, conversation.turns, { A: 'reader', B: 'jfk' });
    // a threshold nothing reaches: no speech, no segments
    const deaf = await diarized({ chunking_strategy: { type: 'server_vad', threshold: 1 } });
    assert.deepEqual(deaf.segments, []);
  });
});

describe('diarized transcripts on an engine that times no words', () => {
  let server: TestServer;
  let model: string;
  const conversation = dialogue();
  const cleanups: (() => Promise<void>)[] = [];
  after(() => Promise.all(cleanups.map((cleanup) => cleanup())));
  const post = (body: FormData, signal?: AbortSignal): Promise<Response> => fetch(`${server.base}/v1/audio/transcriptions`, { method: 'POST', body, signal });

  before(async () => {
    // a random-weight Qwen3-ASR: fast, and its words are not timed, so each speaker's turns are transcribed alone
    model = (await audioLmTestModel({ arch: 'qwen3asr', size: 'tiny' })).dir;
    server = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) }, { sttModel: model, maxAudioSeconds: 600 });
  });

  it('transcribes each speaker turn on its own: every segment belongs to one speaker', async () => {
    const response = await post(form({ model, response_format: 'diarized_json', max_tokens: '8' }, conversation.wav));
    assert.equal(response.status, 200);
    const result = (await response.json()) as Diarized;
    assert.ok(result.segments.length >= 4, `one segment per turn at least: ${result.segments.length}`);
    for (const segment of result.segments) {
      const people = new Set(conversation.turns.filter((turn) => turn.start < segment.end - 0.3 && turn.end > segment.start + 0.3).map((turn) => turn.speaker));
      assert.ok(people.size <= 1, `${JSON.stringify(segment)} spans ${[...people].join(' and ')}`);
    }
    assertSpeakersFollowTurns(result.segments, conversation.turns, { A: 'reader', B: 'jfk' });
  });

  it('puts speakers on srt and vtt cues and NDJSON lines as on verbose_json segments', async () => {
    const verbose = (await (await post(form({ model, response_format: 'verbose_json', diarize: 'true', max_tokens: '8' }, conversation.wav))).json()) as {
      segments: { speaker: string }[];
    };
    const labels = verbose.segments.map((s) => s.speaker);

    const srt = await (await post(form({ model, max_tokens: '8', response_format: 'srt', diarize: 'true' }, conversation.wav))).text();
    const cues = srt.trim().split('\n\n');
    assert.equal(cues.length, labels.length);
    cues.forEach((cue, i) => assert.match(cue.split('\n')[2] ?? '', new RegExp(`^${labels[i]}: \\S`), cue));

    const vtt = await (await post(form({ model, max_tokens: '8', response_format: 'vtt', diarize: 'true' }, conversation.wav))).text();
    const vttCues = vtt
      .replace(/^WEBVTT\n\n/, '')
      .trim()
      .split('\n\n');
    vttCues.forEach((cue, i) => assert.match(cue.split('\n')[1] ?? '', new RegExp(`^<v ${labels[i]}>\\S`), cue));

    const ndjson = await (await post(form({ model, max_tokens: '8', response_format: 'ndjson', diarize: 'true' }, conversation.wav))).text();
    assert.deepEqual(
      ndjson
        .trim()
        .split('\n')
        .map((line) => (JSON.parse(line) as { speaker: string }).speaker),
      labels,
    );
  });

  it('honours min_speakers and max_speakers', async () => {
    const speakers = async (fields: Record<string, string>): Promise<Set<string>> => {
      const body = (await (await post(form({ model, max_tokens: '8', response_format: 'diarized_json', ...fields }, conversation.wav))).json()) as Diarized;
      return new Set(body.segments.map((s) => s.speaker));
    };
    assert.deepEqual(await speakers({ max_speakers: '1' }), new Set(['A']));
    assert.ok((await speakers({ min_speakers: '3' })).size >= 2);
  });

  it('diarizes a long file, and stops the work of a client that leaves', async () => {
    // flite's US female and Scottish male voices, 15 sentences each
    const built = await buildDialogue({ speakers: ['slt', 'awb'], seed: 7, turnsPerSpeaker: 15 });
    const long = { wav: wavBytes(built.samples, RATE), turns: built.turns, duration: built.samples.length / RATE };
    const body = (await (await post(form({ model, max_tokens: '8', response_format: 'diarized_json' }, long.wav, 'long.wav'))).json()) as Diarized;
    assert.ok(long.duration > 60, `${long.duration} s`);
    assertSpeakersFollowTurns(body.segments, long.turns, {
      A: built.turns[0]!.speaker,
      B: built.turns.find((t) => t.speaker !== built.turns[0]!.speaker)!.speaker,
    });
    assert.ok(body.segments.at(-1)!.end > long.duration - 5, 'the end of the file is transcribed');

    // four times as long, so the work is well under way when the client leaves
    const longer = new Float32Array(built.samples.length * 4).map((_, i) => built.samples[i % built.samples.length] as number);
    const cancelledBefore = await cancelledJobs(server.base);
    const controller = new AbortController();
    const pending = post(form({ model, max_tokens: '8', response_format: 'diarized_json' }, wavBytes(longer, RATE), 'longer.wav'), controller.signal);
    setTimeout(() => controller.abort(), 1000);
    await assert.rejects(pending);
    await waitForCancelledJob(server.base, cancelledBefore, performance.now() + 30_000, 'the transcription stops when its client leaves');
    const again = await post(form({ model, max_tokens: '8', response_format: 'diarized_json' }, wavBytes(seconds(0, 3), RATE)));
    assert.equal(again.status, 200);
  });
});
