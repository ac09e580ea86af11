/** Transcribe: a file (dropped, picked or recorded) through POST /v1/audio/transcriptions or /translations. */
import { useMemo, useRef, useState } from 'preact/hooks';
import { apiFetch, type ModelInfo } from './api';
import { ErrorNote, FileDrop, fileStem, formatSeconds, ModelPicker, Player, saveBlob, Status, useModelChoice, useObjectUrl } from './components';
import { extensionOf, MIC_RULE, useRecorder } from './media';
import { modelsFor } from './model-list';

interface Word {
  word: string;
  start: number;
  end: number;
}
interface Segment {
  id: number;
  start: number;
  end: number;
  text: string;
}
interface VerboseTranscript {
  text: string;
  language?: string;
  duration?: number;
  segments?: Segment[];
  words?: Word[];
}

/** Export buttons: the API renders each format itself (`response_format`); JSON is its verbose form. */
const EXPORTS = [
  { label: '.txt', format: 'text', extension: 'txt', type: 'text/plain' },
  { label: '.srt', format: 'srt', extension: 'srt', type: 'application/x-subrip' },
  { label: '.vtt', format: 'vtt', extension: 'vtt', type: 'text/vtt' },
  { label: '.json', format: 'verbose_json', extension: 'json', type: 'application/json' },
] as const;

export function TranscribeView({ models }: { models: ModelInfo[] }) {
  const sttModels = useMemo(() => modelsFor('stt', models), [models]);
  const [model, setModel] = useModelChoice(sttModels, 'whisper-1');
  const [file, setFile] = useState<File | null>(null);
  const [language, setLanguage] = useState('');
  const [task, setTask] = useState<'transcriptions' | 'translations'>('transcriptions');
  const [words, setWords] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [transcript, setTranscript] = useState<VerboseTranscript | null>(null);
  const [exportError, setExportError] = useState<unknown>(null);
  const [exporting, setExporting] = useState<string | null>(null);
  const recorder = useRecorder();
  const [recordError, setRecordError] = useState<unknown>(null);
  const audio = useRef<HTMLAudioElement | null>(null);
  const fileUrl = useObjectUrl(file);
  /** The request behind the transcript shown, so exports ask for exactly that one in other formats. */
  const shown = useRef<{ file: File; model: string; language: string; task: string } | null>(null);

  function form(format: string, request: { file: File; model: string; language: string; task: string }): FormData {
    const body = new FormData();
    body.append('file', request.file, request.file.name);
    body.append('model', request.model);
    body.append('response_format', format);
    if (request.language && request.task === 'transcriptions') body.append('language', request.language);
    if (format === 'verbose_json') {
      body.append('timestamp_granularities[]', 'segment');
      if (words) body.append('timestamp_granularities[]', 'word');
    }
    return body;
  }

  async function transcribe(event: Event): Promise<void> {
    event.preventDefault();
    if (!file) return;
    setBusy(true);
    setError(null);
    setExportError(null);
    const request = { file, model, language: language.trim(), task };
    try {
      const response = await apiFetch(`/v1/audio/${task}`, { method: 'POST', body: form('verbose_json', request) });
      setTranscript((await response.json()) as VerboseTranscript);
      shown.current = request;
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }

  async function exportAs(choice: (typeof EXPORTS)[number]): Promise<void> {
    const request = shown.current;
    if (!request) return;
    setExporting(choice.label);
    setExportError(null);
    try {
      const response = await apiFetch(`/v1/audio/${request.task}`, { method: 'POST', body: form(choice.format, request) });
      const stem = fileStem(request.file.name.replace(/\.[^.]+$/, ''), request.model);
      saveBlob(new Blob([await response.arrayBuffer()], { type: choice.type }), `${stem}.${choice.extension}`);
    } catch (failure) {
      setExportError(failure);
    } finally {
      setExporting(null);
    }
  }

  async function toggleRecording(): Promise<void> {
    setRecordError(null);
    try {
      if (!recorder.recording) return await recorder.start(null);
      const recording = await recorder.stop();
      if (recording) setFile(new File([recording], `recording-${fileStem('mic')}.${extensionOf(recording.type)}`, { type: recording.type }));
    } catch (failure) {
      setRecordError(failure);
    }
  }

  const seek = (seconds: number): void => {
    const element = audio.current;
    if (!element) return;
    element.currentTime = seconds;
    void element.play().catch(() => undefined);
  };

  return (
    <section aria-labelledby="transcribe-title" class="view">
      <h2 id="transcribe-title">Transcribe</h2>
      <form class="card" onSubmit={transcribe}>
        <div class="row">
          <FileDrop label="Audio file" accept="audio/*,video/*,.wav,.mp3,.flac,.m4a,.aac,.ogg,.opus,.webm" file={file} onFile={setFile} />
          <div class="field record">
            <button type="button" class={recorder.recording ? 'danger' : 'secondary'} onClick={toggleRecording} aria-pressed={recorder.recording}>
              {recorder.recording ? '■ Stop recording' : '● Record from microphone'}
            </button>
            <span class="hint">{MIC_RULE}</span>
            <ErrorNote error={recordError} />
          </div>
        </div>
        <div class="row">
          <div class="field">
            <label for="transcribe-model">Model</label>
            <ModelPicker id="transcribe-model" models={sttModels} value={model} onChange={setModel} />
          </div>
          <div class="field">
            <label for="transcribe-task">Task</label>
            <select id="transcribe-task" value={task} onChange={(e) => setTask(e.currentTarget.value as typeof task)}>
              <option value="transcriptions">Transcribe</option>
              <option value="translations">Translate to English</option>
            </select>
          </div>
          <div class="field">
            <label for="transcribe-language">Language</label>
            <input
              id="transcribe-language"
              type="text"
              value={language}
              placeholder="auto (e.g. en)"
              disabled={task === 'translations'}
              onInput={(e) => setLanguage(e.currentTarget.value)}
            />
          </div>
          <div class="field checkbox">
            <input id="transcribe-words" type="checkbox" checked={words} onChange={(e) => setWords(e.currentTarget.checked)} />
            <label for="transcribe-words">Word timestamps</label>
          </div>
        </div>
        <div class="actions">
          <button type="submit" disabled={!file || !model || busy}>
            {busy ? 'Transcribing…' : task === 'translations' ? 'Translate' : 'Transcribe'}
          </button>
        </div>
        <ErrorNote error={error} id="transcribe-error" />
        <Status>{busy ? 'Transcribing…' : transcript ? plural(transcript.segments?.length ?? 0, 'segment') : ''}</Status>
        {fileUrl && <Player src={fileUrl} blob={file} label="Uploaded audio" audioRef={audio} />}
      </form>
      {transcript && (
        <section class="card" aria-labelledby="transcript-title">
          <div class="card-head">
            <h3 id="transcript-title">Transcript{transcript.language ? ` (${transcript.language})` : ''}</h3>
            <div class="actions" role="group" aria-label="Export the transcript">
              {EXPORTS.map((choice) => (
                <button key={choice.label} type="button" class="secondary small" disabled={exporting !== null} onClick={() => exportAs(choice)}>
                  {exporting === choice.label ? 'Exporting…' : `Export ${choice.label}`}
                </button>
              ))}
            </div>
          </div>
          <ErrorNote error={exportError} />
          {transcript.segments && transcript.segments.length > 0 ? (
            <ol class="segments">
              {transcript.segments.map((segment) => (
                <li key={segment.id}>
                  <button
                    type="button"
                    class="segment"
                    onClick={() => seek(segment.start)}
                    aria-label={`Play from ${formatSeconds(segment.start)}: ${segment.text}`}
                  >
                    <span class="time">
                      {formatSeconds(segment.start)} – {formatSeconds(segment.end)}
                    </span>
                    <span class="segment-text">{segment.text.trim()}</span>
                  </button>
                  {transcript.words && (
                    <span class="words">
                      {transcript.words
                        .filter((w) => w.start >= segment.start && w.end <= segment.end + 0.01)
                        .map((w, index) => (
                          <button
                            key={index}
                            type="button"
                            class="word"
                            onClick={() => seek(w.start)}
                            title={`${formatSeconds(w.start)} – ${formatSeconds(w.end)}`}
                          >
                            {w.word.trim()}
                          </button>
                        ))}
                    </span>
                  )}
                </li>
              ))}
            </ol>
          ) : (
            <p class="transcript-text">{transcript.text || '(no speech recognised)'}</p>
          )}
        </section>
      )}
    </section>
  );
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}
