/** Separate: one sound out of a mixture through POST /v1/audio/separations; target and residual as WAVs. */
import { useMemo, useState } from 'preact/hooks';
import { apiJson, type ModelInfo } from './api';
import { DownloadLink, ErrorNote, FileDrop, fileStem, ModelPicker, Player, Status, uploadRefusal, useModelChoice, useObjectUrl } from './components';
import { modelsFor } from './model-list';

interface Stems {
  target: Blob;
  residual: Blob;
  description: string;
  stem: string;
}

export function SeparateView({ models }: { models: ModelInfo[] }) {
  const separationModels = useMemo(() => modelsFor('separation', models), [models]);
  const [model, setModel] = useModelChoice(separationModels, 'spectral');
  // a loaded separator lists the sounds it extracts (GET /v1/models); any other takes the description as typed
  const targets = separationModels.find((m) => m.id === model)?.targets ?? [];
  const [file, setFile] = useState<File | null>(null);
  const [description, setDescription] = useState('voice');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [stems, setStems] = useState<Stems | null>(null);
  const inputUrl = useObjectUrl(file);
  const targetUrl = useObjectUrl(stems?.target ?? null);
  const residualUrl = useObjectUrl(stems?.residual ?? null);
  // a file over the API's limit is refused here, not after its upload
  const refusal = file ? uploadRefusal(file) : null;

  function pick(picked: File): void {
    setFile(picked);
    setStems(null);
    setError(null);
  }

  async function separate(event: Event): Promise<void> {
    event.preventDefault();
    if (!file || refusal) return;
    setBusy(true);
    setError(null);
    setStems(null);
    const body = new FormData();
    body.append('file', file, file.name);
    body.append('model', model);
    body.append('description', description.trim());
    try {
      const answer = await apiJson<{ target: string; residual: string }>('/v1/audio/separations', { method: 'POST', body });
      setStems({
        target: wavBlob(answer.target),
        residual: wavBlob(answer.residual),
        description: description.trim(),
        stem: fileStem(file.name.replace(/\.[^.]+$/, ''), description.trim()),
      });
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }

  return (
    <section aria-labelledby="separate-title" class="view">
      <h2 id="separate-title">Separate</h2>
      <form class="card" onSubmit={separate}>
        <FileDrop label="Mixture" accept="audio/*,.wav,.mp3,.flac,.m4a,.ogg,.opus" file={file} onFile={pick} />
        <div class="row">
          <div class="field">
            <label for="separate-model">Model</label>
            <ModelPicker id="separate-model" models={separationModels} value={model} onChange={setModel} />
          </div>
          <div class="field grow">
            <label for="separate-description">Sound to extract</label>
            <input
              id="separate-description"
              type="text"
              list="separate-suggestions"
              value={description}
              onInput={(e) => setDescription(e.currentTarget.value)}
              placeholder={targets.length ? `e.g. ${targets.slice(0, 3).join(', ')}` : 'the sound, in words'}
            />
            <datalist id="separate-suggestions">
              {targets.map((suggestion) => (
                <option key={suggestion} value={suggestion} />
              ))}
            </datalist>
          </div>
        </div>
        <div class="actions">
          <button type="submit" disabled={!file || refusal !== null || !model || !description.trim() || busy}>
            {busy ? 'Separating…' : 'Separate'}
          </button>
        </div>
        <ErrorNote error={refusal ?? error} id="separate-error" />
        <Status>{busy ? 'Separating…' : stems ? `Extracted “${stems.description}”` : ''}</Status>
        {inputUrl && !refusal && (
          <div class="track">
            <h3>Input</h3>
            <Player src={inputUrl} blob={file} label="Input mixture" />
          </div>
        )}
      </form>
      {stems && (
        <div class="card">
          <div class="track">
            <div class="card-head">
              <h3>Target: {stems.description}</h3>
              <DownloadLink blob={stems.target} filename={`${stems.stem}-target.wav`}>
                Download target WAV
              </DownloadLink>
            </div>
            <Player src={targetUrl} blob={stems.target} label={`Target: ${stems.description}`} />
          </div>
          <div class="track">
            <div class="card-head">
              <h3>Residual: everything else</h3>
              <DownloadLink blob={stems.residual} filename={`${stems.stem}-residual.wav`}>
                Download residual WAV
              </DownloadLink>
            </div>
            <Player src={residualUrl} blob={stems.residual} label="Residual" />
          </div>
        </div>
      )}
    </section>
  );
}

function wavBlob(base64: string): Blob {
  const binary = atob(base64);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return new Blob([bytes], { type: 'audio/wav' });
}
