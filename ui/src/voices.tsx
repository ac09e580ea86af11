/**
 * Custom voices in Speak (docs/ui.md): "New voice" makes one from a sample of 2 to 30 s (a file or the microphone),
 * what it says, a name and, where the server asks for it, the speaker's consent (a recording of them agreeing, or a
 * consent kept from before), through POST /v1/audio/voice_consents and POST /v1/audio/voices.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { apiJson, pageConfig } from './api';
import { ClipPicker, clipLengthProblem, type Clip } from './clip-picker';
import { ErrorNote } from './components';

/** The API's limits on a voice sample (docs/api.md, "Custom voices"). */
const SAMPLE_SECONDS = { min: 2, max: 30 };

export interface CustomVoice {
  id: string;
  name: string;
}

interface Consent {
  id: string;
  name: string;
  language: string;
}

/** The browser's language as a BCP 47 tag, which is what the API takes. */
const BROWSER_LANGUAGE = navigator.language || 'en-US';

/** The statement the speaker reads for a new consent recording. */
function consentStatement(name: string): string {
  return `I, ${name.trim() || '(your name)'}, agree that this server may make a synthetic voice from my voice and speak with it.`;
}

/** An audio file for a form field: a recording gets a name with its type's extension. */
function asFile(clip: Clip): File {
  if (clip.blob instanceof File) return clip.blob;
  const extension = /ogg/.test(clip.blob.type) ? 'ogg' : /mp4/.test(clip.blob.type) ? 'm4a' : 'webm';
  return new File([clip.blob], `${clip.name}.${extension}`, { type: clip.blob.type });
}

export function NewVoice({ onCreated, onCancel }: { onCreated: (voice: CustomVoice) => void; onCancel: () => void }) {
  // unknown (a UI serving another server's API): asked for, as the server default is to require it
  const askConsent = pageConfig.requireVoiceConsent !== false;
  const [name, setName] = useState('');
  const [sample, setSample] = useState<Clip | null>(null);
  const [transcript, setTranscript] = useState('');
  const [consents, setConsents] = useState<Consent[]>([]);
  /** A consent kept on the server, or '' for a new recording. */
  const [consentId, setConsentId] = useState('');
  const [recording, setRecording] = useState<Clip | null>(null);
  const [language, setLanguage] = useState(BROWSER_LANGUAGE);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [recordError, setRecordError] = useState<unknown>(null);
  const nameInput = useRef<HTMLInputElement>(null);

  // the form opens below the Speak card: focus brings it into view and starts where a person starts
  useEffect(() => nameInput.current?.focus(), []);

  useEffect(() => {
    if (!askConsent) return;
    apiJson<{ data: Consent[] }>('/v1/audio/voice_consents?limit=100').then(
      (answer) => setConsents(answer.data),
      () => setConsents([]), // a new recording is still offered
    );
  }, [askConsent]);

  const sampleProblem = sample ? clipLengthProblem(sample, SAMPLE_SECONDS.min, SAMPLE_SECONDS.max, 'a voice is made from') : null;
  const consentReady = !askConsent || consentId !== '' || (recording !== null && language.trim() !== '');
  const ready = !busy && name.trim() !== '' && sample !== null && sampleProblem === null && consentReady;

  async function create(event: Event): Promise<void> {
    event.preventDefault();
    if (!sample) return;
    setBusy(true);
    setError(null);
    try {
      let consent = consentId;
      if (askConsent && !consent && recording) {
        const form = new FormData();
        form.append('name', name.trim());
        form.append('language', language.trim());
        form.append('recording', asFile(recording));
        const made = await apiJson<Consent>('/v1/audio/voice_consents', { method: 'POST', body: form });
        // kept chosen, so that a voice refused for another reason is retried with this consent, not a second one
        setConsents((all) => [...all, made]);
        setConsentId(made.id);
        consent = made.id;
      }
      const form = new FormData();
      form.append('name', name.trim());
      form.append('audio_sample', asFile(sample));
      if (transcript.trim()) form.append('ref_text', transcript.trim());
      if (consent) form.append('consent', consent);
      onCreated(await apiJson<CustomVoice>('/v1/audio/voices', { method: 'POST', body: form }));
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }

  return (
    <form class="card new-voice" aria-labelledby="new-voice-title" onSubmit={create}>
      <h3 id="new-voice-title">New voice</h3>
      <p class="hint">
        A voice made from {SAMPLE_SECONDS.min}–{SAMPLE_SECONDS.max} s of one person speaking, kept on the server and offered by every model that clones voices.
      </p>
      <div class="field">
        <label for="voice-name">Name</label>
        <input id="voice-name" type="text" maxLength={64} value={name} ref={nameInput} onInput={(e) => setName(e.currentTarget.value)} />
      </div>
      <div class="field">
        <span class="label">Sample</span>
        <div class="clip-fields">
          <ClipPicker label="Voice sample" clip={sample} onClip={setSample} onRecordError={setRecordError} />
        </div>
        <ErrorNote error={sampleProblem} id="voice-sample-problem" />
      </div>
      <div class="field">
        <label for="voice-transcript">What the sample says (optional)</label>
        <textarea id="voice-transcript" rows={2} value={transcript} onInput={(e) => setTranscript(e.currentTarget.value)} />
      </div>
      {askConsent && (
        <fieldset class="consent">
          <legend>The speaker's consent</legend>
          <p class="hint">
            The person whose voice this is must agree to it. Record them reading the statement below, or choose a consent recorded before. The server keeps the
            recording; whoever runs the server answers for the consents it holds.
          </p>
          <div class="field">
            <label for="voice-consent">Consent</label>
            <select id="voice-consent" value={consentId} onChange={(e) => setConsentId(e.currentTarget.value)}>
              <option value="">A new recording</option>
              {consents.map((c) => (
                <option key={c.id} value={c.id}>
                  {c.name} ({c.language})
                </option>
              ))}
            </select>
          </div>
          {consentId === '' && (
            <>
              <blockquote class="consent-statement">{consentStatement(name)}</blockquote>
              <div class="clip-fields">
                <ClipPicker label="Consent recording" clip={recording} onClip={setRecording} onRecordError={setRecordError} />
              </div>
              <div class="field">
                <label for="voice-consent-language">Language of the recording</label>
                <input
                  id="voice-consent-language"
                  class="language-tag"
                  type="text"
                  value={language}
                  placeholder="en-US"
                  onInput={(e) => setLanguage(e.currentTarget.value)}
                />
              </div>
            </>
          )}
        </fieldset>
      )}
      <ErrorNote error={recordError} />
      <div class="actions">
        <button type="submit" disabled={!ready}>
          {busy ? 'Creating…' : 'Create voice'}
        </button>
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
      <ErrorNote error={error} id="voice-error" />
    </form>
  );
}
