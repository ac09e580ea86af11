/**
 * Live: the microphone streamed to WS /v1/realtime. An AudioWorklet taps the input, the page sends PCM16 at the
 * context's own rate (declared in session.update, the server resamples) and shows each turn's deltas as they
 * arrive and its final transcript. server_vad cuts turns by default; manual mode commits on request.
 */
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { ApiFailure, apiSocketUrl, type ModelInfo } from './api';
import { ErrorNote, ModelPicker, Status, useModelChoice } from './components';
import { canCapture, MIC_RULE, openMicrophone, useAudioInputs } from './media';
import { modelsFor } from './model-list';
import { drawLiveWave, rmsLevel } from './waveform';

interface Turn {
  id: string;
  text: string;
  done: boolean;
}

interface Capture {
  socket: WebSocket;
  stream: MediaStream;
  context: AudioContext;
  frame: number;
}

/** `onRunningChange`: told when a session starts and ends, so the tab can say one runs while another view is shown. */
export function LiveView({ models, onRunningChange }: { models: ModelInfo[]; onRunningChange: (running: boolean) => void }) {
  const sttModels = useMemo(() => modelsFor('stt', models), [models]);
  const [model, setModel] = useModelChoice(sttModels, 'sphinx');
  const { inputs, refresh: refreshInputs } = useAudioInputs();
  const [device, setDevice] = useState('');
  const [serverVad, setServerVad] = useState(true);
  const [state, setState] = useState<'idle' | 'connecting' | 'live'>('idle');
  const [speaking, setSpeaking] = useState(false);
  const [turns, setTurns] = useState<Turn[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [level, setLevel] = useState(0);
  const capture = useRef<Capture | null>(null);
  const canvas = useRef<HTMLCanvasElement>(null);

  useEffect(() => () => stop(), []);
  useEffect(() => onRunningChange(state !== 'idle'), [state]);

  function stop(): void {
    const current = capture.current;
    capture.current = null;
    if (!current) return;
    cancelAnimationFrame(current.frame);
    current.stream.getTracks().forEach((track) => track.stop());
    void current.context.close();
    if (current.socket.readyState <= WebSocket.OPEN) current.socket.close(1000);
    setState('idle');
    setSpeaking(false);
    setLevel(0);
  }

  function updateTurn(id: string, change: (turn: Turn) => Turn): void {
    setTurns((all) => {
      const existing = all.find((turn) => turn.id === id);
      if (!existing) return [...all, change({ id, text: '', done: false })];
      return all.map((turn) => (turn.id === id ? change(turn) : turn));
    });
  }

  function onEvent(raw: string): void {
    const event = JSON.parse(raw) as { type: string; item_id?: string; delta?: string; transcript?: string; error?: { message: string; code?: string } };
    switch (event.type) {
      case 'conversation.item.input_audio_transcription.delta':
        updateTurn(event.item_id ?? '', (turn) => ({ ...turn, text: turn.text + (event.delta ?? '') }));
        break;
      case 'conversation.item.input_audio_transcription.completed':
        updateTurn(event.item_id ?? '', (turn) => ({ ...turn, text: event.transcript ?? turn.text, done: true }));
        break;
      case 'input_audio_buffer.speech_started':
        setSpeaking(true);
        break;
      case 'input_audio_buffer.speech_stopped':
        setSpeaking(false);
        break;
      case 'error':
        setError(new ApiFailure(event.error?.message ?? 'realtime error', event.error?.code ?? 'realtime_error', null));
        break;
    }
  }

  async function start(): Promise<void> {
    setError(null);
    setState('connecting');
    let stream: MediaStream;
    try {
      stream = await openMicrophone(device || null);
      refreshInputs(); // device names are listed once the microphone was allowed
    } catch (failure) {
      setError(failure);
      setState('idle');
      return;
    }
    const context = new AudioContext();
    const workletUrl = URL.createObjectURL(new Blob([PCM_WORKLET_SOURCE], { type: 'text/javascript' }));
    await context.audioWorklet.addModule(workletUrl);
    URL.revokeObjectURL(workletUrl);
    const source = context.createMediaStreamSource(stream);
    const analyser = context.createAnalyser();
    analyser.fftSize = 2048;
    const tap = new AudioWorkletNode(context, 'pcm-capture');
    // a worklet runs only while the graph pulls it: through a silent gain to the output
    const silence = context.createGain();
    silence.gain.value = 0;
    source.connect(analyser);
    source.connect(tap).connect(silence).connect(context.destination);

    const socket = new WebSocket(apiSocketUrl(`/v1/realtime?model=${encodeURIComponent(model)}`), ['realtime']);
    const current: Capture = { socket, stream, context, frame: 0 };
    capture.current = current;
    socket.onopen = () => {
      socket.send(
        JSON.stringify({
          type: 'session.update',
          session: {
            type: 'transcription',
            audio: { input: { format: { type: 'audio/pcm', rate: context.sampleRate }, turn_detection: serverVad ? { type: 'server_vad' } : null } },
          },
        }),
      );
      tap.port.onmessage = (message: MessageEvent<Float32Array>) => {
        if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: pcm16Base64(message.data) }));
      };
      setState('live');
    };
    socket.onmessage = (message) => typeof message.data === 'string' && onEvent(message.data);
    socket.onerror = () => setError(new Error(`The realtime connection to ${apiSocketUrl('/v1/realtime')} failed.`));
    socket.onclose = (close) => {
      if (close.code !== 1000 && close.code !== 1005)
        setError((previous: unknown) => previous ?? new Error(`The server closed the session (${close.code}${close.reason ? `: ${close.reason}` : ''}).`));
      if (capture.current === current) stop();
    };

    const window = new Float32Array(analyser.fftSize);
    const draw = (): void => {
      analyser.getFloatTimeDomainData(window);
      setLevel(rmsLevel(window));
      if (canvas.current) drawLiveWave(canvas.current, window);
      current.frame = requestAnimationFrame(draw);
    };
    draw();
  }

  const commit = (): void => capture.current?.socket.send(JSON.stringify({ type: 'input_audio_buffer.commit' }));
  const live = state !== 'idle';

  return (
    <section aria-labelledby="live-title" class="view">
      <h2 id="live-title">Live transcription</h2>
      <div class="card">
        <div class="row">
          <div class="field">
            <label for="live-model">Model</label>
            <ModelPicker id="live-model" models={sttModels} value={model} onChange={setModel} disabled={live} />
          </div>
          <div class="field">
            <label for="live-device">Microphone</label>
            <select id="live-device" value={device} disabled={live} onChange={(e) => setDevice(e.currentTarget.value)}>
              <option value="">Default input</option>
              {inputs
                .filter((input) => input.deviceId && input.deviceId !== 'default')
                .map((input, index) => (
                  <option key={input.deviceId} value={input.deviceId}>
                    {input.label || `Input ${index + 1}`}
                  </option>
                ))}
            </select>
          </div>
          <div class="field checkbox">
            <input id="live-vad" type="checkbox" checked={serverVad} disabled={live} onChange={(e) => setServerVad(e.currentTarget.checked)} />
            <label for="live-vad">Detect turns on the server (server_vad)</label>
          </div>
        </div>
        <div class="actions">
          <button type="button" class={live ? 'danger' : ''} onClick={() => (live ? stop() : void start())} disabled={!model || state === 'connecting'}>
            {state === 'connecting' ? 'Connecting…' : live ? '■ Stop' : '● Start live transcription'}
          </button>
          <button type="button" class="secondary" onClick={commit} disabled={state !== 'live'} title="Ends the current turn now">
            Commit turn
          </button>
          {!canCapture && <span class="hint">{MIC_RULE}</span>}
        </div>
        <ErrorNote error={error} id="live-error" />
        <div class="meter" aria-hidden={!live}>
          <div class="level" role="meter" aria-label="Microphone level" aria-valuemin={0} aria-valuemax={100} aria-valuenow={Math.round(level * 100)}>
            <div class="level-bar" style={{ width: `${Math.min(100, level * 300)}%` }} />
          </div>
          <canvas ref={canvas} class="waveform live" aria-hidden="true" />
        </div>
        <Status>{state === 'live' ? (speaking ? 'Speech detected…' : 'Listening') : state === 'connecting' ? 'Connecting…' : ''}</Status>
      </div>
      <section class="card" aria-labelledby="live-transcript-title">
        <div class="card-head">
          <h3 id="live-transcript-title">Transcript</h3>
          <button type="button" class="secondary small" onClick={() => setTurns([])} disabled={turns.length === 0}>
            Clear
          </button>
        </div>
        {turns.length === 0 ? (
          <p class="hint">Turns appear here as you speak.</p>
        ) : (
          <ol class="turns" aria-live="polite">
            {turns.map((turn) => (
              <li key={turn.id} class={turn.done ? 'done' : 'open'}>
                {turn.text || '…'}
              </li>
            ))}
          </ol>
        )}
      </section>
    </section>
  );
}

/** Float samples as base64 PCM16 little-endian, what `input_audio_buffer.append` carries. */
function pcm16Base64(samples: Float32Array): string {
  const bytes = new Uint8Array(samples.length * 2);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < samples.length; i++) {
    const clamped = Math.max(-1, Math.min(1, samples[i]!));
    view.setInt16(i * 2, clamped < 0 ? clamped * 0x8000 : clamped * 0x7fff, true);
  }
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}
