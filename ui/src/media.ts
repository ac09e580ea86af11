/** Microphone access and clips: the devices on offer, recordings through MediaRecorder, why capture was refused, clips as data URLs. */
import { useEffect, useRef, useState } from 'preact/hooks';

/**
 * Browsers offer the microphone only to secure contexts: https:// pages, or http://localhost and 127.0.0.1.
 * A page reached over plain http under another name gets no navigator.mediaDevices at all.
 */
export const MIC_RULE = 'Browsers allow microphone capture only on https:// pages or on http://localhost (127.0.0.1).';

/** Whether this page may ask for the microphone at all (whether it is granted is the browser's question). */
export const canCapture = window.isSecureContext && typeof navigator.mediaDevices?.getUserMedia === 'function';

export class CaptureRefused extends Error {
  override name = 'CaptureRefused';
}

/** The microphone (a chosen device, or the default), or CaptureRefused saying why and what to do. */
export async function openMicrophone(deviceId: string | null): Promise<MediaStream> {
  if (!canCapture) {
    throw new CaptureRefused(`This page (${location.origin}) may not use the microphone. ${MIC_RULE}`);
  }
  try {
    return await navigator.mediaDevices.getUserMedia({
      audio: { ...(deviceId ? { deviceId: { exact: deviceId } } : {}), echoCancellation: false, noiseSuppression: false, autoGainControl: true },
    });
  } catch (error) {
    const name = error instanceof DOMException ? error.name : '';
    if (name === 'NotAllowedError') throw new CaptureRefused(`Microphone access was refused. Allow it in the browser's site settings. ${MIC_RULE}`);
    if (name === 'NotFoundError') throw new CaptureRefused('No microphone was found.');
    throw new CaptureRefused(`The microphone could not be opened: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** Audio inputs the browser lists (names appear once the page was allowed the microphone). */
export function useAudioInputs(): { inputs: MediaDeviceInfo[]; refresh: () => void } {
  const [inputs, setInputs] = useState<MediaDeviceInfo[]>([]);
  const refresh = (): void => {
    navigator.mediaDevices
      ?.enumerateDevices()
      .then((devices) => setInputs(devices.filter((device) => device.kind === 'audioinput')))
      .catch(() => setInputs([]));
  };
  useEffect(() => {
    refresh();
    navigator.mediaDevices?.addEventListener('devicechange', refresh);
    return () => navigator.mediaDevices?.removeEventListener('devicechange', refresh);
  }, []);
  return { inputs, refresh };
}

/** Records the microphone into one compressed file (WebM/Opus where the browser has it). */
export function useRecorder(): {
  recording: boolean;
  start: (deviceId: string | null) => Promise<void>;
  stop: () => Promise<Blob | null>;
} {
  const [recording, setRecording] = useState(false);
  const recorder = useRef<MediaRecorder | null>(null);
  const chunks = useRef<Blob[]>([]);

  useEffect(() => () => recorder.current?.stream.getTracks().forEach((track) => track.stop()), []);

  return {
    recording,
    async start(deviceId) {
      const stream = await openMicrophone(deviceId);
      const type = ['audio/webm;codecs=opus', 'audio/ogg;codecs=opus', 'audio/mp4'].find((t) => MediaRecorder.isTypeSupported(t));
      const instance = new MediaRecorder(stream, type ? { mimeType: type } : {});
      chunks.current = [];
      instance.ondataavailable = (event) => chunks.current.push(event.data);
      instance.start(250);
      recorder.current = instance;
      setRecording(true);
    },
    stop() {
      const instance = recorder.current;
      if (!instance) return Promise.resolve(null);
      return new Promise((resolve) => {
        instance.onstop = () => {
          instance.stream.getTracks().forEach((track) => track.stop());
          recorder.current = null;
          setRecording(false);
          resolve(new Blob(chunks.current, { type: instance.mimeType }));
        };
        instance.stop();
      });
    },
  };
}

/** The extension of a recording's container, for its upload name. */
export function extensionOf(mimeType: string): string {
  if (mimeType.includes('webm')) return 'webm';
  if (mimeType.includes('ogg')) return 'ogg';
  if (mimeType.includes('mp4')) return 'm4a';
  return 'wav';
}

/** A clip as the base64 data: URL the API takes for reference audio (`ref_audio`, `known_speaker_references[]`). */
export function dataUrl(blob: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result as string);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}
