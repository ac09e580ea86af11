/** A short clip chosen from a file or recorded from the microphone: known speakers in Transcribe, new voices in Speak. */
import { useRef } from 'preact/hooks';
import { canCapture, MIC_RULE, useRecorder } from './media';
import { decodeFirstChannel } from './waveform';

export interface Clip {
  blob: Blob;
  /** The picked file's name, or "recording". */
  name: string;
  /** Its length as the browser decodes it; null until then, or when it cannot (the API judges it). */
  seconds: number | null;
}

/** Why a clip's length is outside `min`..`max` seconds, or null; `purpose` ends the sentence ("a speaker is named by"). */
export function clipLengthProblem(clip: Clip, min: number, max: number, purpose: string): string | null {
  if (clip.seconds === null || (clip.seconds >= min && clip.seconds <= max)) return null;
  return `This clip lasts ${clip.seconds.toFixed(1)} s; ${purpose} a clip of ${min} to ${max} s.`;
}

/**
 * "Choose clip", "Record" and what was taken, as three items of the caller's flex row. `label` names the clip for
 * assistive technology ("Clip of known speaker 1"); a recording the browser refuses is passed to `onRecordError`.
 */
export function ClipPicker({
  label,
  clip,
  onClip,
  onRecordError,
}: {
  label: string;
  clip: Clip | null;
  onClip: (clip: Clip) => void;
  onRecordError: (failure: unknown) => void;
}) {
  const recorder = useRecorder();
  /** The clip being decoded: a later pick wins over an earlier one still decoding. */
  const latest = useRef<Blob | null>(null);

  function take(blob: Blob, name: string): void {
    latest.current = blob;
    onClip({ blob, name, seconds: null });
    decodeFirstChannel(blob).then(
      (decoded) => latest.current === blob && onClip({ blob, name, seconds: decoded.duration }),
      () => undefined, // a format the browser cannot decode may still be one the API can
    );
  }

  async function toggleRecording(): Promise<void> {
    onRecordError(null);
    try {
      if (!recorder.recording) return await recorder.start(null);
      const recording = await recorder.stop();
      if (recording) take(recording, 'recording');
    } catch (failure) {
      onRecordError(failure);
    }
  }

  return (
    <>
      <label class="button secondary small">
        Choose clip
        <input
          type="file"
          accept="audio/*,video/*,.wav,.mp3,.flac,.m4a,.ogg,.opus,.webm"
          class="visually-hidden"
          aria-label={label}
          onChange={(e) => {
            const picked = e.currentTarget.files?.[0];
            if (picked) take(picked, picked.name);
            e.currentTarget.value = ''; // the same file picked again still counts
          }}
        />
      </label>
      <button
        type="button"
        class={`small ${recorder.recording ? 'danger' : 'secondary'}`}
        onClick={toggleRecording}
        aria-pressed={recorder.recording}
        disabled={!canCapture}
        title={canCapture ? undefined : MIC_RULE}
      >
        {recorder.recording ? '■ Stop' : '● Record'}
      </button>
      <span class="hint clip-name" title={clip?.name}>
        {clip ? `${clip.name}${clip.seconds !== null ? ` · ${clip.seconds.toFixed(1)} s` : ''}` : 'no clip'}
      </span>
    </>
  );
}
