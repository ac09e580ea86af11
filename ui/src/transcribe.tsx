/** Transcribe: a file (dropped, picked or recorded) through POST /v1/audio/transcriptions or /translations. */
import { useMemo, useRef, useState } from 'preact/hooks';
import { renderTranscript } from '../../src/routes/transcript-formats';
import { ApiFailure, apiFetch, type ModelInfo } from './api';
import { ErrorNote, FileDrop, fileStem, formatSeconds, ModelPicker, Player, saveBlob, Status, uploadRefusal, useModelChoice, useObjectUrl } from './components';
import { canCapture, extensionOf, MIC_RULE, useRecorder } from './media';
import { modelsFor, resolvedModel } from './model-list';
import {
  appendKnownSpeakers,
  emptySpeaker,
  KnownSpeakers,
  SPEAKER_PARAMS,
  SpeakerLegend,
  speakersReady,
  speakerStyle,
  speakerSummary,
  speakerText,
  startsTurn,
  type KnownSpeaker,
} from './speakers';

interface Word {
  word: string;
  start: number;
  end: number;
}
/** A verbose_json segment: the vendor's fields (src/routes/transcript-formats.ts vendorSegment). */
interface Segment {
  id: number;
  start: number;
  end: number;
  text: string;
  tokens: number[];
  temperature: number;
  avg_logprob: number;
  compression_ratio: number;
  no_speech_prob: number;
  /** Who says it: present when speakers were asked for (`diarize=true`). */
  speaker?: string;
}
interface VerboseTranscript {
  task: 'transcribe' | 'translate';
  text: string;
  language?: string;
  duration: number;
  segments?: Segment[];
  words?: Word[];
}

/** The language a model that does not identify languages (Parakeet v3) reports when none was given: not worth a heading. */
const UNIDENTIFIED_LANGUAGE = 'unknown';

/**
 * Export buttons. The page holds the verbose_json answer; the other formats are rendered from it by the server's
 * own renderer (bundled), so an export neither asks the API again nor formats differently from it.
 */
const EXPORTS = [
  { label: '.txt', format: 'text', extension: 'txt', type: 'text/plain' },
  { label: '.srt', format: 'srt', extension: 'srt', type: 'application/x-subrip' },
  { label: '.vtt', format: 'vtt', extension: 'vtt', type: 'text/vtt' },
  { label: '.json', format: 'verbose_json', extension: 'json', type: 'application/json' },
] as const;

function exported(format: (typeof EXPORTS)[number]['format'], transcript: VerboseTranscript): string {
  if (format === 'verbose_json') return JSON.stringify(transcript);
  // the API's text format is the bare text; the page's .txt says who speaks each paragraph
  if (format === 'text' && transcript.segments?.some((segment) => segment.speaker !== undefined)) return speakerText(transcript.segments);
  const result = {
    text: transcript.text,
    language: transcript.language ?? '',
    duration: transcript.duration,
    segments: (transcript.segments ?? []).map((segment) => ({
      id: segment.id,
      start: segment.start,
      end: segment.end,
      text: segment.text,
      tokens: segment.tokens,
      temperature: segment.temperature,
      avgLogprob: segment.avg_logprob,
      compressionRatio: segment.compression_ratio,
      noSpeechProb: segment.no_speech_prob,
      speaker: segment.speaker,
    })),
  };
  return renderTranscript(format, result, { task: transcript.task, verbose: false, words: false, segments: true }).body;
}

export function TranscribeView({ models }: { models: ModelInfo[] }) {
  const sttModels = useMemo(() => modelsFor('stt', models), [models]);
  const [model, setModel] = useModelChoice(sttModels, 'whisper-1');
  const [file, setFile] = useState<File | null>(null);
  const [language, setLanguage] = useState('');
  const [task, setTask] = useState<'transcriptions' | 'translations'>('transcriptions');
  const [wordsWanted, setWords] = useState(false);
  // a loaded model that times no words (an audio language model) would answer the request with a 400
  const timesWords = resolvedModel(model, models)?.word_timestamps !== false;
  const words = wordsWanted && timesWords;
  const [speakers, setSpeakers] = useState(false);
  const [knownSpeakers, setKnownSpeakers] = useState<KnownSpeaker[]>(() => [emptySpeaker()]);
  /** Set by a send with a known speaker that cannot go: from then on, each row's problem shows beside it. */
  const [speakersChecked, setSpeakersChecked] = useState(false);
  const [speakersError, setSpeakersError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [transcript, setTranscript] = useState<VerboseTranscript | null>(null);
  const recorder = useRecorder();
  const [recordError, setRecordError] = useState<unknown>(null);
  const audio = useRef<HTMLAudioElement | null>(null);
  const fileUrl = useObjectUrl(file);
  /** Names the exported files: the file and model behind the transcript shown, and the known speakers it was sent. */
  const shown = useRef<{ file: File; model: string; speakerNames: string[] } | null>(null);
  // a file over the API's limit is refused here, not after its upload
  const refusal = file ? uploadRefusal(file) : null;

  function pick(picked: File): void {
    setFile(picked);
    setTranscript(null);
    setError(null);
  }

  async function transcribe(event: Event): Promise<void> {
    event.preventDefault();
    if (!file || refusal) return;
    setSpeakersError(null);
    if (speakers && !speakersReady(knownSpeakers)) {
      setSpeakersChecked(true);
      return;
    }
    setBusy(true);
    setError(null);
    setTranscript(null);
    const body = new FormData();
    body.append('file', file, file.name);
    body.append('model', model);
    body.append('response_format', 'verbose_json');
    // translations take it too: a model that cannot identify languages (Parakeet v3) translates English audio only when told
    if (language.trim()) body.append('language', language.trim());
    body.append('timestamp_granularities[]', 'segment');
    if (words) body.append('timestamp_granularities[]', 'word');
    try {
      let speakerNames: string[] = [];
      if (speakers) {
        body.append('diarize', 'true');
        speakerNames = await appendKnownSpeakers(body, knownSpeakers);
      }
      const response = await apiFetch(`/v1/audio/${task}`, { method: 'POST', body });
      const answer = (await response.json()) as VerboseTranscript;
      shown.current = { file, model, speakerNames };
      setTranscript(answer);
    } catch (failure) {
      if (failure instanceof ApiFailure && failure.param !== null && SPEAKER_PARAMS.includes(failure.param.replace(/\[\]$/, ''))) setSpeakersError(failure);
      else setError(failure);
    } finally {
      setBusy(false);
    }
  }

  function exportAs(choice: (typeof EXPORTS)[number]): void {
    if (!transcript || !shown.current) return;
    const stem = fileStem(shown.current.file.name.replace(/\.[^.]+$/, ''), shown.current.model);
    saveBlob(new Blob([exported(choice.format, transcript)], { type: choice.type }), `${stem}.${choice.extension}`);
  }

  async function toggleRecording(): Promise<void> {
    setRecordError(null);
    try {
      if (!recorder.recording) return await recorder.start(null);
      const recording = await recorder.stop();
      if (recording) pick(new File([recording], `recording-${fileStem('mic')}.${extensionOf(recording.type)}`, { type: recording.type }));
    } catch (failure) {
      setRecordError(failure);
    }
  }

  /** The transcript's speakers (none unless they were asked for), each with its colour. */
  const talkers = useMemo(() => speakerSummary(transcript?.segments ?? []), [transcript]);
  const colourOf = (speaker: string | undefined): Record<string, string> | undefined => {
    const colour = talkers.find((talker) => talker.speaker === speaker)?.colour;
    return colour ? speakerStyle(colour) : undefined;
  };

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
          <FileDrop label="Audio file" accept="audio/*,video/*,.wav,.mp3,.flac,.m4a,.aac,.ogg,.opus,.webm" file={file} onFile={pick} />
          <div class="field record">
            <button type="button" class={recorder.recording ? 'danger' : 'secondary'} onClick={toggleRecording} aria-pressed={recorder.recording}>
              {recorder.recording ? '■ Stop recording' : '● Record from microphone'}
            </button>
            {!canCapture && <span class="hint">{MIC_RULE}</span>}
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
            <input id="transcribe-language" type="text" value={language} placeholder="auto (e.g. en)" onInput={(e) => setLanguage(e.currentTarget.value)} />
          </div>
          {/* the two switches share a column, so the pickers keep room for their names */}
          <div class="field switches">
            <div class="field checkbox">
              <input
                id="transcribe-words"
                type="checkbox"
                checked={words}
                disabled={!timesWords}
                title={timesWords ? undefined : 'This model gives no word timestamps'}
                onChange={(e) => setWords(e.currentTarget.checked)}
              />
              <label for="transcribe-words" title={timesWords ? undefined : 'This model gives no word timestamps'}>
                Word timestamps
              </label>
            </div>
            <div class="field checkbox">
              <input id="transcribe-speakers" type="checkbox" role="switch" checked={speakers} onChange={(e) => setSpeakers(e.currentTarget.checked)} />
              <label for="transcribe-speakers" title="Who spoke when: each segment labelled with its speaker">
                Speakers
              </label>
            </div>
          </div>
        </div>
        {speakers && <KnownSpeakers rows={knownSpeakers} setRows={setKnownSpeakers} showProblems={speakersChecked} error={speakersError} />}
        <div class="actions">
          <button type="submit" disabled={!file || refusal !== null || !model || busy}>
            {busy ? 'Transcribing…' : task === 'translations' ? 'Translate' : 'Transcribe'}
          </button>
        </div>
        <ErrorNote error={refusal ?? error} id="transcribe-error" />
        <Status>{busy ? 'Transcribing…' : transcript ? summary(transcript, talkers.length) : ''}</Status>
        {fileUrl && !refusal && <Player src={fileUrl} blob={file} label="Uploaded audio" audioRef={audio} />}
      </form>
      {transcript && (
        <section class="card" aria-labelledby="transcript-title">
          <div class="card-head">
            <h3 id="transcript-title">Transcript{transcript.language && transcript.language !== UNIDENTIFIED_LANGUAGE ? ` (${transcript.language})` : ''}</h3>
            <div class="actions" role="group" aria-label="Export the transcript">
              {EXPORTS.map((choice) => (
                <button key={choice.label} type="button" class="secondary small" onClick={() => exportAs(choice)}>
                  Export {choice.label}
                </button>
              ))}
            </div>
          </div>
          {talkers.length > 0 && (
            <SpeakerLegend speakers={talkers} unmatched={(shown.current?.speakerNames ?? []).filter((name) => !talkers.some((t) => t.speaker === name))} />
          )}
          {transcript.segments && transcript.segments.length > 0 ? (
            <ol class={`segments ${talkers.length > 0 ? 'by-speaker' : ''}`}>
              {transcript.segments.map((segment, index, all) => (
                <li key={segment.id} class={startsTurn(all, index) ? 'turn' : undefined} style={colourOf(segment.speaker)}>
                  {startsTurn(all, index) && <span class="speaker-label">{segment.speaker}</span>}
                  <button
                    type="button"
                    class="segment"
                    onClick={() => seek(segment.start)}
                    aria-label={`Play from ${formatSeconds(segment.start)}: ${segment.speaker !== undefined ? `${segment.speaker}: ` : ''}${segment.text}`}
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

/** "6 segments", and with speakers "6 segments, 2 speakers". */
function summary(transcript: VerboseTranscript, speakers: number): string {
  const segments = plural(transcript.segments?.length ?? 0, 'segment');
  return speakers > 0 ? `${segments}, ${plural(speakers, 'speaker')}` : segments;
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}
