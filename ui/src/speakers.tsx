/**
 * Speakers in Transcribe (docs/ui.md): known speakers named by a clip each, sent as `known_speaker_names[]` and
 * `known_speaker_references[]`, and what a diarized transcript shows: runs of one speaker, a colour per speaker
 * and each one's talk time.
 */
import { useState } from 'preact/hooks';
import { ClipPicker, clipLengthProblem, type Clip } from './clip-picker';
import { ErrorNote, formatSeconds } from './components';
import { dataUrl } from './media';

/** The API's limits on known speakers (docs/api.md, "Diarized transcripts"): at most 4, each named by a clip of 2 to 10 s. */
export const MAX_KNOWN_SPEAKERS = 4;
const CLIP_SECONDS = { min: 2, max: 10 };
/** Colours in styles.css (`--speaker-0` ...), each readable on the light and the dark theme; more speakers reuse them. */
const PALETTE_SIZE = 8;

export interface KnownSpeaker {
  /** Keeps a row's recorder and inputs with it when another row is removed. */
  key: number;
  name: string;
  clip: Clip | null;
}

let nextKey = 0;
export function emptySpeaker(): KnownSpeaker {
  return { key: nextKey++, name: '', clip: null };
}

/** Why a row cannot be sent, or null when it can; a row with neither name nor clip is left out, not a problem. */
function rowProblem(row: KnownSpeaker, rows: KnownSpeaker[]): string | null {
  const name = row.name.trim();
  if (!name && !row.clip) return null;
  if (!name) return 'Name the speaker of this clip.';
  if (!row.clip) return `Choose or record a clip of ${name}.`;
  const length = clipLengthProblem(row.clip, CLIP_SECONDS.min, CLIP_SECONDS.max, 'a speaker is named by');
  if (length) return length;
  if (rows.slice(0, rows.indexOf(row)).some((other) => other.name.trim() === name)) return `Another speaker is already named ${name}.`;
  return null;
}

/** Whether every row can be sent. */
export function speakersReady(rows: KnownSpeaker[]): boolean {
  return rows.every((row) => rowProblem(row, rows) === null);
}

/** The rows that name someone, in the request's fields: names and clips in the same order. */
export async function appendKnownSpeakers(body: FormData, rows: KnownSpeaker[]): Promise<string[]> {
  const named = rows.filter((row) => row.clip && row.name.trim());
  for (const row of named) {
    body.append('known_speaker_names[]', row.name.trim());
    body.append('known_speaker_references[]', await dataUrl(row.clip!.blob));
  }
  return named.map((row) => row.name.trim());
}

/** The errors the API reports against the speaker fields, shown beside them rather than under the form. */
export const SPEAKER_PARAMS = ['diarize', 'known_speaker_names', 'known_speaker_references', 'min_speakers', 'max_speakers'];

type Rows = (update: (rows: KnownSpeaker[]) => KnownSpeaker[]) => void;

/** The known-speaker rows: a name and a clip (a file, or the microphone) each. Problems show once a send was tried. */
export function KnownSpeakers({ rows, setRows, showProblems, error }: { rows: KnownSpeaker[]; setRows: Rows; showProblems: boolean; error: unknown }) {
  const update = (key: number, change: Partial<KnownSpeaker>): void => setRows((all) => all.map((row) => (row.key === key ? { ...row, ...change } : row)));
  return (
    <fieldset class="known-speakers">
      <legend>Known speakers (optional)</legend>
      <p class="hint" id="known-speakers-hint">
        Name up to {MAX_KNOWN_SPEAKERS} voices by a {CLIP_SECONDS.min}–{CLIP_SECONDS.max} s clip of each; other voices are labelled A, B, … in the order they
        first speak.
      </p>
      {rows.map((row, index) => (
        <SpeakerRow
          key={row.key}
          row={row}
          number={index + 1}
          problem={showProblems ? rowProblem(row, rows) : null}
          onChange={(change) => update(row.key, change)}
          onRemove={() => setRows((all) => all.filter((other) => other.key !== row.key))}
        />
      ))}
      <div class="actions">
        <button
          type="button"
          class="secondary small"
          disabled={rows.length >= MAX_KNOWN_SPEAKERS}
          onClick={() => setRows((all) => [...all, emptySpeaker()])}
          title={rows.length >= MAX_KNOWN_SPEAKERS ? `The API takes up to ${MAX_KNOWN_SPEAKERS} known speakers` : undefined}
        >
          + Add a speaker
        </button>
      </div>
      <ErrorNote error={error} id="transcribe-speakers-error" />
    </fieldset>
  );
}

function SpeakerRow({
  row,
  number,
  problem,
  onChange,
  onRemove,
}: {
  row: KnownSpeaker;
  number: number;
  problem: string | null;
  onChange: (change: Partial<KnownSpeaker>) => void;
  onRemove: () => void;
}) {
  const [recordError, setRecordError] = useState<unknown>(null);
  const problemId = `known-speaker-${row.key}-problem`;
  return (
    <div class="known-speaker">
      <div class="known-speaker-fields">
        <input
          type="text"
          class="known-speaker-name"
          value={row.name}
          maxLength={64}
          placeholder="Name"
          aria-label={`Name of known speaker ${number}`}
          aria-invalid={problem !== null}
          aria-describedby={problemId}
          onInput={(e) => onChange({ name: e.currentTarget.value })}
        />
        <ClipPicker label={`Clip of known speaker ${number}`} clip={row.clip} onClip={(clip) => onChange({ clip })} onRecordError={setRecordError} />
        <button type="button" class="secondary small" onClick={onRemove} aria-label={`Remove known speaker ${number}`}>
          Remove
        </button>
      </div>
      <ErrorNote error={problem} id={problemId} />
      <ErrorNote error={recordError} />
    </div>
  );
}

interface Spoken {
  start: number;
  end: number;
  text: string;
  speaker?: string;
}

/** Whether the segment at `index` begins a run of its speaker's: where a label goes. */
export function startsTurn(segments: Spoken[], index: number): boolean {
  const speaker = segments[index]?.speaker;
  return speaker !== undefined && (index === 0 || segments[index - 1]?.speaker !== speaker);
}

/** The speakers of a transcript in the order they first speak, each with its colour (a CSS value) and time spoken. */
export function speakerSummary(segments: Spoken[]): { speaker: string; colour: string; seconds: number }[] {
  const speakers = new Map<string, { speaker: string; colour: string; seconds: number }>();
  for (const { speaker, start, end } of segments) {
    if (speaker === undefined) continue;
    const entry = speakers.get(speaker) ?? { speaker, colour: `var(--speaker-${speakers.size % PALETTE_SIZE})`, seconds: 0 };
    entry.seconds += Math.max(0, end - start);
    speakers.set(speaker, entry);
  }
  return [...speakers.values()];
}

/** The .txt of a diarized transcript: each run of one speaker as a paragraph that starts with its label (`A: ...`). */
export function speakerText(segments: Spoken[]): string {
  const paragraphs: string[] = [];
  segments.forEach((segment, index) => {
    if (index === 0 || startsTurn(segments, index)) paragraphs.push(segment.speaker === undefined ? '' : `${segment.speaker}:`);
    paragraphs[paragraphs.length - 1] += ` ${segment.text.trim()}`;
  });
  return paragraphs.map((paragraph) => paragraph.trim()).join('\n\n') + '\n';
}

/** Who spoke, in colour and by name, and for how long; known speakers that no voice matched are said too. */
export function SpeakerLegend({ speakers, unmatched }: { speakers: ReturnType<typeof speakerSummary>; unmatched: string[] }) {
  return (
    <div class="speaker-summary">
      <ul class="speaker-legend" aria-label="Speakers">
        {speakers.map(({ speaker, colour, seconds }) => (
          <li key={speaker} style={speakerStyle(colour)}>
            <span class="swatch" aria-hidden="true" />
            <span class="speaker-name">{speaker}</span>
            <span class="talk-time" title="Time spoken">
              {formatSeconds(seconds)}
            </span>
          </li>
        ))}
      </ul>
      {unmatched.length > 0 && <p class="hint">No voice matched the clip of {unmatched.join(', ')}.</p>}
    </div>
  );
}

/** Sets `--speaker`, which the styles of a speaker's label, bar and swatch take their colour from. */
export function speakerStyle(colour: string): Record<string, string> {
  return { '--speaker': colour };
}
