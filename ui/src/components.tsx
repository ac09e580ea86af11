/** Pieces every view uses: error notes, the audio player with its waveform, download links, file pickers. */
import type { ComponentChildren } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { describeError, errorCode, isCatalogModel, pageConfig, type ModelInfo } from './api';
import { CatalogFetch } from './model-fetch';
import { announceModelsChanged } from './model-list';
import { decodeFirstChannel, drawWaveform } from './waveform';

/**
 * An error next to the control that caused it, announced by screen readers (role=alert is aria-live=assertive).
 * Always rendered, so the live region exists before its text changes.
 */
export function ErrorNote({ error, id }: { error: unknown; id?: string }) {
  const code = errorCode(error);
  return (
    <p class="error" role="alert" id={id} hidden={error == null}>
      {error == null ? '' : describeError(error)}
      {code && <span class="error-code">code: {code}</span>}
    </p>
  );
}

/** A polite status line (progress, counts) for assistive tech. */
export function Status({ children }: { children: ComponentChildren }) {
  return (
    <p class="status" role="status" aria-live="polite">
      {children}
    </p>
  );
}

/**
 * A URL for a blob, revoked when the blob changes or the component goes. Made during the render that brings the
 * blob, so a player can swap from a stream to the finished file without a render in between that has neither.
 */
export function useObjectUrl(blob: Blob | null): string | null {
  const url = useMemo(() => (blob ? URL.createObjectURL(blob) : null), [blob]);
  useEffect(() => () => url !== null && URL.revokeObjectURL(url), [url]);
  return url;
}

interface PlayerProps {
  /** What the <audio> plays: a blob: URL of a whole file, or a MediaSource URL while a stream arrives. */
  src: string | null;
  /** The whole file, once there is one: its waveform is drawn and clicking it seeks. */
  blob: Blob | null;
  label: string;
  /** Exposes the element, e.g. so a transcript can seek it. */
  audioRef?: { current: HTMLAudioElement | null };
  autoPlay?: boolean;
}

/**
 * An <audio> player with a waveform under it. When `src` changes (a stream replaced by its finished file) the
 * position and play state carry over, so the swap is not heard.
 */
export function Player({ src, blob, label, audioRef, autoPlay }: PlayerProps) {
  const audio = useRef<HTMLAudioElement>(null);
  const canvas = useRef<HTMLCanvasElement>(null);
  const [samples, setSamples] = useState<Float32Array | null>(null);
  const [progress, setProgress] = useState(0);
  const resume = useRef<{ time: number; playing: boolean } | null>(null);

  useEffect(() => {
    if (audioRef) audioRef.current = audio.current;
  });

  useEffect(() => {
    let current = true;
    setSamples(null);
    if (blob)
      decodeFirstChannel(blob).then(
        (decoded) => current && setSamples(decoded.samples),
        () => current && setSamples(null), // a format the browser cannot decode still plays or downloads
      );
    return () => {
      current = false;
    };
  }, [blob]);

  useEffect(() => {
    if (canvas.current && samples) drawWaveform(canvas.current, samples, progress);
  }, [samples, progress]);

  useEffect(() => {
    if (!samples) return;
    const redraw = (): void => {
      if (canvas.current) drawWaveform(canvas.current, samples, progress);
    };
    window.addEventListener('resize', redraw);
    return () => window.removeEventListener('resize', redraw);
  }, [samples, progress]);

  // remembered before React swaps `src`, restored once the new source knows its duration
  const element = audio.current;
  if (element && src && element.getAttribute('src') !== src && element.getAttribute('src')) {
    resume.current = { time: element.currentTime, playing: !element.paused };
  }

  const onLoaded = (): void => {
    const saved = resume.current;
    const element = audio.current;
    if (!saved || !element) return;
    resume.current = null;
    element.currentTime = Math.min(saved.time, element.duration || saved.time);
    if (saved.playing) void element.play().catch(() => undefined);
  };

  const seek = (event: MouseEvent): void => {
    const element = audio.current;
    const target = event.currentTarget as HTMLCanvasElement;
    if (!element || !Number.isFinite(element.duration)) return;
    const box = target.getBoundingClientRect();
    element.currentTime = ((event.clientX - box.left) / box.width) * element.duration;
  };

  const seekByKey = (event: KeyboardEvent): void => {
    const element = audio.current;
    if (!element || !Number.isFinite(element.duration)) return;
    const step = event.key === 'ArrowRight' ? 5 : event.key === 'ArrowLeft' ? -5 : 0;
    if (step === 0) return;
    event.preventDefault();
    element.currentTime = Math.max(0, Math.min(element.duration, element.currentTime + step));
  };

  return (
    <div class="player">
      <audio
        ref={audio}
        controls
        src={src ?? undefined}
        autoPlay={autoPlay}
        aria-label={label}
        onLoadedMetadata={onLoaded}
        onTimeUpdate={(event) => {
          const target = event.currentTarget;
          setProgress(Number.isFinite(target.duration) && target.duration > 0 ? target.currentTime / target.duration : 0);
        }}
      />
      {samples && (
        <canvas
          ref={canvas}
          class="waveform"
          role="slider"
          tabIndex={0}
          aria-label={`${label}: waveform, click or use the arrow keys to seek`}
          aria-valuemin={0}
          aria-valuemax={100}
          aria-valuenow={Math.round(progress * 100)}
          onClick={seek}
          onKeyDown={seekByKey}
        />
      )}
    </div>
  );
}

/** A link styled as a button that saves `blob` as `filename`. */
export function DownloadLink({ blob, filename, small, children }: { blob: Blob; filename: string; small?: boolean; children: ComponentChildren }) {
  const url = useObjectUrl(blob);
  if (!url) return null;
  return (
    <a class={`button secondary ${small ? 'small' : ''}`} href={url} download={filename}>
      {children}
    </a>
  );
}

/** Saves a blob under a name, as a click on a download link would. */
export function saveBlob(blob: Blob, filename: string): void {
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = filename;
  link.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** A drop zone that is also a file button (keyboard users pick, mouse users drop or pick). */
export function FileDrop({ label, accept, onFile, file }: { label: string; accept: string; onFile: (file: File) => void; file: File | null }) {
  const [over, setOver] = useState(false);
  return (
    <label
      class={`drop ${over ? 'over' : ''}`}
      onDragOver={(event) => {
        event.preventDefault();
        setOver(true);
      }}
      onDragLeave={() => setOver(false)}
      onDrop={(event) => {
        event.preventDefault();
        setOver(false);
        const dropped = event.dataTransfer?.files[0];
        if (dropped) onFile(dropped);
      }}
    >
      <span class="drop-title">{label}</span>
      <span class="drop-hint">{file ? `${file.name} (${formatBytes(file.size)})` : 'Drop a file here, or click to choose one'}</span>
      <input
        type="file"
        accept={accept}
        class="visually-hidden"
        onChange={(event) => {
          const picked = event.currentTarget.files?.[0];
          if (picked) onFile(picked);
        }}
      />
    </label>
  );
}

export function formatBytes(bytes: number): string {
  const trim = (value: string): string => value.replace(/\.0+$/, '');
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${trim((bytes / 1024).toFixed(1))} KiB`;
  if (bytes < 1024 ** 3) return `${trim((bytes / 1024 ** 2).toFixed(1))} MiB`;
  return `${trim((bytes / 1024 ** 3).toFixed(2))} GiB`;
}

/** Why the API would refuse this file as too large, before a byte of it is sent; null when it may go. */
export function uploadRefusal(file: File): Error | null {
  const limit = pageConfig.maxUploadBytes ?? null;
  if (limit === null || file.size <= limit) return null;
  return new Error(`${file.name} is ${formatBytes(file.size)}; this server takes up to ${formatBytes(limit)}`);
}

/** 83.4 → "1:23.4". */
export function formatSeconds(seconds: number): string {
  const minutes = Math.floor(seconds / 60);
  const rest = seconds - minutes * 60;
  return `${minutes}:${rest.toFixed(1).padStart(4, '0')}`;
}

/** A file name stem safe on every system: "voxd-flite-slt-20250101-120000". */
export function fileStem(...parts: string[]): string {
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  return [...parts, stamp].map((part) => part.replace(/[^\w.-]+/g, '_')).join('-');
}

/** Where a local model's name ends and its folder begins: its ID is its absolute path. */
function folderEnd(id: string): number {
  const slash = id.lastIndexOf('/');
  return id.startsWith('/') && slash > 0 ? slash : -1;
}

/** A model by name: a local file or directory by its own name, without its folder; any other ID as it is. */
export function modelName(id: string): string {
  return id.slice(folderEnd(id) + 1);
}

/** A model as a picker shows it: a local one by its name before its folder, since a closed <select> shows only the start of its text. */
function modelLabel(id: string): string {
  const slash = folderEnd(id);
  return slash < 0 ? id : `${modelName(id)} (${id.slice(0, slash)})`;
}

/**
 * A <select> of model IDs, aliases marked with the model they stand for and catalog models not yet downloaded with
 * their size; the chosen ID in full on hover. Under it, a chosen catalog model not yet downloaded offers its download.
 */
export function ModelPicker({
  id,
  models,
  value,
  onChange,
  describedBy,
  disabled,
}: {
  id: string;
  models: ModelInfo[];
  value: string;
  onChange: (id: string) => void;
  describedBy?: string;
  disabled?: boolean;
}) {
  return (
    <>
      <select id={id} value={value} title={value} disabled={disabled} onChange={(event) => onChange(event.currentTarget.value)} aria-describedby={describedBy}>
        {models.length === 0 && <option value="">(no model available)</option>}
        {models.map((model) => (
          <option key={model.id} value={model.id}>
            {isCatalogModel(model) && !model.loaded && !model.cached
              ? `${model.id} (${formatBytes(model.size_bytes ?? 0)} to download)`
              : model.target
                ? `${model.id} → ${modelLabel(model.target)}`
                : modelLabel(model.id)}
          </option>
        ))}
      </select>
      {/* one per model: a fetch shows under the model it fetches, never under the next one chosen */}
      <CatalogFetch key={value} model={models.find((model) => model.id === value)} onFetched={announceModelsChanged} />
    </>
  );
}

/** Keeps `value` one of `models`' IDs: the first one when it is not. */
export function useModelChoice(models: ModelInfo[], preferred?: string): [string, (id: string) => void] {
  const [value, setValue] = useState('');
  useEffect(() => {
    if (models.some((model) => model.id === value)) return;
    const fallback = models.find((model) => model.id === preferred) ?? models[0];
    setValue(fallback?.id ?? '');
  }, [models, value, preferred]);
  return [value, setValue];
}
