/** Speak: text to speech through POST /v1/audio/speech, streamed into the player while it is synthesised. */
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { apiFetch, apiJson, jsonBody, pageConfig, type ModelInfo } from './api';
import {
  DownloadLink,
  ErrorNote,
  fileStem,
  formatBytes,
  formatSeconds,
  ModelPicker,
  modelName,
  Player,
  Status,
  useModelChoice,
  useObjectUrl,
} from './components';
import { addToHistory, loadHistory, removeFromHistory, type SpeechResult } from './history';
import { dataUrl, useRecorder } from './media';
import { modelsFor } from './model-list';
import { NewVoice, type CustomVoice } from './voices';
import { decodeFirstChannel } from './waveform';

const FORMATS = ['mp3', 'wav', 'flac', 'ogg', 'opus', 'aac', 'pcm'] as const;
type Format = (typeof FORMATS)[number];

/** Streamed playback needs MediaSource to take the stream's container as it arrives: MP3 here. */
const canStream = typeof MediaSource !== 'undefined' && MediaSource.isTypeSupported('audio/mpeg');

interface Voice {
  id: string;
  name: string;
  /** The `lang_code` the voice speaks, where it has one of its own (Kokoro's voices). */
  language?: string;
  /** A custom voice (POST /v1/audio/voices), rather than one of the model's own. */
  custom?: boolean;
}

/** What GET /v1/audio/voices says the model honours; until it answers, every control is offered. */
interface Capabilities {
  cloning: boolean;
  instructions: boolean;
  /** The languages to choose between (`lang_code`), where the model speaks several. */
  languages?: { code: string; name: string }[];
}
const EVERY_CAPABILITY: Capabilities = { cloning: true, instructions: true };

/** The voice's own language where the model offers it, else the model's first language ('' where it offers none). */
function languageOf(voice: Voice | undefined, languages: Capabilities['languages']): string {
  if (!languages) return '';
  return languages.find((l) => l.code === voice?.language)?.code ?? languages[0]?.code ?? '';
}

/** `apiOnline`: the API answers as ready; the voices are asked again each time it comes back. */
export function SpeakView({ models, apiOnline }: { models: ModelInfo[]; apiOnline: boolean }) {
  const ttsModels = useMemo(() => modelsFor('tts', models), [models]);
  const [model, setModel] = useModelChoice(ttsModels, 'tts-1');
  const [voices, setVoices] = useState<Voice[]>([]);
  const [voice, setVoice] = useState('');
  // the request's lang_code where the model offers languages ('' sends none: the server's default)
  const [language, setLanguage] = useState('');
  const [voicesError, setVoicesError] = useState<unknown>(null);
  /** Bumped when a custom voice is made or deleted, so the list is asked again. */
  const [voicesVersion, setVoicesVersion] = useState(0);
  const [newVoiceOpen, setNewVoiceOpen] = useState(false);
  const [limits, setLimits] = useState<Capabilities>(EVERY_CAPABILITY);
  const [text, setText] = useState('Hello from voxd. This speech was synthesised on your own machine.');
  const [format, setFormat] = useState<Format>('mp3');
  const [speed, setSpeed] = useState(1);
  const [stream, setStream] = useState(true);
  const [instructions, setInstructions] = useState('');
  const [reference, setReference] = useState<Blob | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [note, setNote] = useState('');
  const [streamUrl, setStreamUrl] = useState<string | null>(null);
  const [result, setResult] = useState<{ blob: Blob; filename: string } | null>(null);
  const [history, setHistory] = useState<SpeechResult[]>([]);
  const resultUrl = useObjectUrl(result?.blob ?? null);
  const recorder = useRecorder();
  const [recordError, setRecordError] = useState<unknown>(null);
  const abort = useRef<AbortController | null>(null);

  const maxChars = pageConfig.maxInputChars;
  const tooLong = maxChars !== null && text.length > maxChars;
  const streaming = stream && format === 'mp3' && canStream;

  useEffect(() => {
    loadHistory().then(setHistory, () => setHistory([]));
  }, []);

  useEffect(() => {
    // asked again when the API comes back (and failing while it is away, so nothing stale is offered)
    if (!model) return;
    let current = true;
    setVoicesError(null);
    apiJson<{ data: Voice[]; capabilities?: Capabilities }>(`/v1/audio/voices?model=${encodeURIComponent(model)}`).then(
      (answer) => {
        if (!current) return;
        setVoices(answer.data);
        setLimits(answer.capabilities ?? EVERY_CAPABILITY);
        setVoice((chosen) => {
          const next = answer.data.some((v) => v.id === chosen) ? chosen : (answer.data[0]?.id ?? '');
          setLanguage(
            languageOf(
              answer.data.find((v) => v.id === next),
              answer.capabilities?.languages,
            ),
          );
          return next;
        });
      },
      (failure: unknown) => current && (setVoices([]), setVoice(''), setVoicesError(failure)),
    );
    return () => {
      current = false;
    };
  }, [model, apiOnline, voicesVersion]);

  useEffect(() => () => abort.current?.abort(), []);

  /** A voice chosen: the language becomes the voice's own, where it has one the model offers. */
  function chooseVoice(id: string): void {
    setVoice(id);
    const own = languageOf(
      voices.find((v) => v.id === id),
      limits.languages,
    );
    if (own) setLanguage(own);
  }

  const canGenerate = !busy && model !== '' && voice !== '' && !tooLong && text.trim() !== '';
  const chosenVoice = voices.find((v) => v.id === voice);
  /** How results name the voice: a custom voice by its name rather than its ID. */
  const voiceLabel = chosenVoice?.custom ? chosenVoice.name : voice;

  function voiceCreated(created: CustomVoice): void {
    setNewVoiceOpen(false);
    setVoice(created.id);
    setVoicesVersion((n) => n + 1);
  }

  async function deleteVoice(): Promise<void> {
    if (!chosenVoice?.custom || !confirm(`Delete the voice “${chosenVoice.name}”? Requests that name it will fail.`)) return;
    setVoicesError(null);
    try {
      await apiFetch(`/v1/audio/voices/${encodeURIComponent(chosenVoice.id)}`, { method: 'DELETE' });
      setVoicesVersion((n) => n + 1);
    } catch (failure) {
      setVoicesError(failure);
    }
  }

  async function generate(event: Event): Promise<void> {
    event.preventDefault();
    abort.current?.abort();
    const controller = new AbortController();
    abort.current = controller;
    setBusy(true);
    setError(null);
    setNote('');
    // the player must take this generation's stream, not keep the previous result
    setResult(null);
    setStreamUrl(null);
    const started = performance.now();
    try {
      const body: Record<string, unknown> = { model, input: text, voice, response_format: format, speed, stream: streaming };
      if (limits.instructions && instructions.trim()) body.instructions = instructions.trim();
      if (limits.languages && language) body.lang_code = language;
      if (limits.cloning && reference) body.ref_audio = await dataUrl(reference);
      const response = await apiFetch('/v1/audio/speech', { ...jsonBody(body), signal: controller.signal });
      const ignored = response.headers.get('x-voxd-ignored');
      const blob = streaming ? await playWhileArriving(response, setStreamUrl) : await response.blob();
      // the server names each format's media type; the page keeps no table of its own
      const audio = new Blob([blob], { type: response.headers.get('content-type') ?? '' });
      const filename = `${fileStem('voxd', model, voiceLabel || 'default')}.${format}`;
      setResult({ blob: audio, filename });
      setStreamUrl(null);
      const duration =
        format === 'pcm'
          ? null
          : await decodeFirstChannel(audio).then(
              (d) => d.duration,
              () => null,
            );
      if (controller.signal.aborted) return;
      setNote(
        `${formatBytes(audio.size)} in ${((performance.now() - started) / 1000).toFixed(1)} s` +
          (duration !== null ? `, ${formatSeconds(duration)} of audio` : '') +
          (ignored ? `. The model ignored: ${ignored}` : ''),
      );
      setHistory(await addToHistory({ text, model, voice: voiceLabel, format, duration, createdAt: Date.now(), audio }));
    } catch (failure) {
      if (!controller.signal.aborted) setError(failure);
    } finally {
      if (abort.current === controller) setBusy(false);
    }
  }

  function stop(): void {
    abort.current?.abort();
    abort.current = null;
    setBusy(false);
    setStreamUrl(null);
    setNote('Stopped');
  }

  async function toggleRecording(): Promise<void> {
    setRecordError(null);
    try {
      if (recorder.recording) setReference(await recorder.stop());
      else await recorder.start(null);
    } catch (failure) {
      setRecordError(failure);
    }
  }

  // not the model's ID, which for a local model is a path that would fill the line
  const cloningReason = limits.cloning ? null : 'This model cannot clone a voice from a reference clip.';
  const instructionsReason = limits.instructions ? null : 'This model does not take style instructions.';

  return (
    <section aria-labelledby="speak-title" class="view">
      <h2 id="speak-title">Speak</h2>
      <form class="card" onSubmit={generate}>
        <div class="field">
          <label for="speak-text">Text</label>
          <textarea
            id="speak-text"
            rows={5}
            value={text}
            onInput={(e) => setText(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key !== 'Enter' || !(e.ctrlKey || e.metaKey)) return;
              e.preventDefault();
              if (canGenerate) e.currentTarget.form?.requestSubmit();
            }}
            aria-describedby="speak-count"
          />
          <span id="speak-count" class={`hint ${tooLong ? 'over' : ''}`}>
            {text.length.toLocaleString()} {maxChars !== null ? `/ ${maxChars.toLocaleString()} characters (the server's limit)` : 'characters'}
          </span>
        </div>
        <div class="row">
          <div class="field grow">
            <label for="speak-model">Model</label>
            <ModelPicker id="speak-model" models={ttsModels} value={model} onChange={setModel} />
          </div>
          <div class="field grow">
            <div class="label-row">
              <label for="speak-voice">Voice</label>
              <button
                type="button"
                class="link"
                disabled={!limits.cloning}
                title={cloningReason ?? 'Make a voice from a sample'}
                aria-expanded={newVoiceOpen}
                onClick={() => setNewVoiceOpen((open) => !open)}
              >
                + New voice
              </button>
              {chosenVoice?.custom && (
                <button type="button" class="link danger" title={`Delete the custom voice “${chosenVoice.name}”`} onClick={deleteVoice}>
                  Delete
                </button>
              )}
            </div>
            <select
              id="speak-voice"
              value={voice}
              title={chosenVoice?.name}
              onChange={(e) => chooseVoice(e.currentTarget.value)}
              aria-describedby="speak-voice-error"
            >
              {voices
                .filter((v) => !v.custom)
                .map((v) => (
                  <option key={v.id} value={v.id}>
                    {v.name}
                  </option>
                ))}
              {voices.some((v) => v.custom) && (
                <optgroup label="Custom voices">
                  {voices
                    .filter((v) => v.custom)
                    .map((v) => (
                      <option key={v.id} value={v.id}>
                        {v.name}
                      </option>
                    ))}
                </optgroup>
              )}
            </select>
          </div>
          {limits.languages && limits.languages.length > 1 && (
            <div class="field">
              <label for="speak-language">Language</label>
              <select id="speak-language" value={language} onChange={(e) => setLanguage(e.currentTarget.value)}>
                {limits.languages.map((l) => (
                  <option key={l.code} value={l.code}>
                    {l.name}
                  </option>
                ))}
              </select>
            </div>
          )}
          <div class="field">
            <label for="speak-format">Format</label>
            <select id="speak-format" value={format} onChange={(e) => setFormat(e.currentTarget.value as Format)}>
              {FORMATS.map((f) => (
                <option key={f} value={f}>
                  {f === 'pcm' ? 'pcm (raw, download only)' : f}
                </option>
              ))}
            </select>
          </div>
          <div class="field">
            <label for="speak-speed">Speed {speed.toFixed(2)}×</label>
            <input id="speak-speed" type="range" min={0.25} max={4} step={0.05} value={speed} onInput={(e) => setSpeed(Number(e.currentTarget.value))} />
          </div>
        </div>
        <ErrorNote id="speak-voice-error" error={voicesError} />
        <div class="field checkbox">
          <input
            id="speak-stream"
            type="checkbox"
            checked={streaming}
            disabled={format !== 'mp3' || !canStream}
            onChange={(e) => setStream(e.currentTarget.checked)}
          />
          <label for="speak-stream">Play while synthesising (stream)</label>
          {(format !== 'mp3' || !canStream) && (
            <span class="hint">{canStream ? 'Streamed playback needs mp3.' : 'This browser cannot play an MP3 stream.'}</span>
          )}
        </div>
        <details class="advanced">
          <summary>Voice cloning and instructions</summary>
          <div class="field">
            <span class="label" id="speak-reference-label">
              Reference clip
            </span>
            <div class="row tight">
              <input
                type="file"
                accept="audio/*"
                aria-labelledby="speak-reference-label"
                disabled={!limits.cloning}
                onChange={(e) => setReference(e.currentTarget.files?.[0] ?? null)}
              />
              <button type="button" class="secondary" disabled={!limits.cloning} onClick={toggleRecording}>
                {recorder.recording ? 'Stop recording' : 'Record'}
              </button>
              {reference && <span class="hint">clip of {formatBytes(reference.size)} ready</span>}
            </div>
            {cloningReason && <span class="hint">{cloningReason}</span>}
            <ErrorNote error={recordError} />
          </div>
          <div class="field">
            <label for="speak-instructions">Instructions</label>
            <input
              id="speak-instructions"
              type="text"
              value={instructions}
              disabled={!limits.instructions}
              placeholder="e.g. calm and slow"
              onInput={(e) => setInstructions(e.currentTarget.value)}
            />
            {instructionsReason && <span class="hint">{instructionsReason}</span>}
          </div>
        </details>
        <div class="actions">
          <button type="submit" disabled={!canGenerate} title="Ctrl+Enter in the text">
            {busy ? 'Generating…' : 'Generate'}
          </button>
          {busy && (
            <button type="button" class="secondary" onClick={stop}>
              Stop
            </button>
          )}
          {result && (
            <DownloadLink blob={result.blob} filename={result.filename}>
              Download {result.filename.split('.').pop()}
            </DownloadLink>
          )}
        </div>
        <ErrorNote error={error} id="speak-error" />
        {tooLong && <p class="hint over">The text is longer than the server accepts ({maxChars} characters).</p>}
        <Status>{busy ? (streamUrl ? 'Playing while the rest is synthesised…' : 'Synthesising…') : note}</Status>
        {(streamUrl || (resultUrl && result?.filename.endsWith('.pcm') === false)) && (
          <Player src={streamUrl ?? resultUrl} blob={result?.blob ?? null} label="Generated speech" autoPlay />
        )}
      </form>
      {newVoiceOpen && <NewVoice onCreated={voiceCreated} onCancel={() => setNewVoiceOpen(false)} />}
      <History
        entries={history}
        onReplay={(entry) => setResult({ blob: entry.audio, filename: `${fileStem('voxd', entry.model, entry.voice)}.${entry.format}` })}
        onRemove={(entry) => removeFromHistory(entry.id).then(setHistory)}
      />
    </section>
  );
}

function History({ entries, onReplay, onRemove }: { entries: SpeechResult[]; onReplay: (e: SpeechResult) => void; onRemove: (e: SpeechResult) => void }) {
  if (entries.length === 0) return null;
  return (
    <section class="card" aria-labelledby="history-title">
      <h3 id="history-title">Recent results</h3>
      <ul class="history">
        {entries.map((entry) => (
          <li key={entry.id}>
            <div class="history-text" title={entry.text}>
              {entry.text}
            </div>
            <div class="history-meta" title={entry.model}>
              {modelName(entry.model)} · {entry.voice || 'default voice'} · {entry.format}
              {entry.duration !== null ? ` · ${formatSeconds(entry.duration)}` : ''}
            </div>
            <div class="history-actions">
              <button type="button" class="secondary small" disabled={entry.format === 'pcm'} onClick={() => onReplay(entry)}>
                Replay
              </button>
              <DownloadLink small blob={entry.audio} filename={`${fileStem('voxd', entry.model, entry.voice)}.${entry.format}`}>
                Download
              </DownloadLink>
              <button type="button" class="secondary small" onClick={() => onRemove(entry)} aria-label={`Remove “${entry.text.slice(0, 40)}” from the history`}>
                Remove
              </button>
            </div>
          </li>
        ))}
      </ul>
    </section>
  );
}

/** How long the player may take to attach a stream before the file is awaited whole instead. */
const SOURCE_OPEN_MS = 5000;

/**
 * Feeds an MP3 response into a MediaSource the player plays from as soon as the first chunk is in; resolves with
 * the whole file, which then replaces the stream (a MediaSource cannot be seeked beyond what arrived or saved).
 */
async function playWhileArriving(response: Response, play: (url: string) => void): Promise<Blob> {
  const source = new MediaSource();
  const url = URL.createObjectURL(source);
  const opened = new Promise<boolean>((resolve) => {
    source.addEventListener('sourceopen', () => resolve(true), { once: true });
    setTimeout(() => resolve(false), SOURCE_OPEN_MS);
  });
  play(url);
  if (!(await opened)) {
    // the player never took the stream: wait for the whole file rather than for nothing
    URL.revokeObjectURL(url);
    return response.blob();
  }
  const buffer = source.addSourceBuffer('audio/mpeg');
  // a loop: an 'updateend' still queued from an append that finished may arrive after the next append began
  const updated = async (): Promise<void> => {
    while (buffer.updating) await new Promise((resolve) => buffer.addEventListener('updateend', resolve, { once: true }));
  };
  const chunks: BlobPart[] = [];
  const reader = response.body!.getReader();
  try {
    for (let read = await reader.read(); !read.done; read = await reader.read()) {
      chunks.push(read.value as Uint8Array<ArrayBuffer>);
      await updated();
      buffer.appendBuffer(read.value as Uint8Array<ArrayBuffer>);
    }
    await updated();
    if (source.readyState === 'open') source.endOfStream();
  } finally {
    URL.revokeObjectURL(url);
  }
  return new Blob(chunks, { type: 'audio/mpeg' });
}
