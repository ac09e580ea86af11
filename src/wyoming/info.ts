/**
 * What a Wyoming `describe` is answered with (docs/wyoming.md): voxd's speech-to-text and text-to-speech programs,
 * each with the one model it serves, in the shape Home Assistant parses strictly (every entry with `name`,
 * `attribution {name, url}` and `installed`; models and voices with `languages` arrays). It is made from what is
 * loaded, at once: a describe never waits for a model.
 */
import type { LoadedModel, SttModel, TtsModel } from '../engines/types.js';
import { LANGUAGE_NAMES } from '../languages.js';

/** The `lang_code` letters (docs/api.md) as the language tags Home Assistant matches. */
const LETTER_LANGUAGES: Readonly<Record<string, string>> = { a: 'en_US', b: 'en_GB', e: 'es', f: 'fr', h: 'hi', i: 'it', j: 'ja', p: 'pt_BR', z: 'zh' };

const ATTRIBUTION = { name: 'voxd', url: 'https://www.npmjs.com/package/voxd' };

/** A voxd language code (a `lang_code` letter, `en`, `en-us`) as a Wyoming language tag (`en_US`, `en`); null for none. */
export function wyomingLanguage(code: string): string | null {
  if (LETTER_LANGUAGES[code]) return LETTER_LANGUAGES[code];
  const [language, region] = code.split('-');
  if (!language || language.length !== 2) return null;
  return region ? `${language}_${region.toUpperCase()}` : language;
}

/** The distinct Wyoming tags of voxd language codes, in their order. */
function tagsOf(codes: readonly string[]): string[] {
  return [...new Set(codes.map(wyomingLanguage).filter((tag): tag is string => tag !== null))];
}

function artifact(name: string, description: string | null, installed: boolean, version: string | null): Record<string, unknown> {
  return { name, attribution: ATTRIBUTION, installed, description, version };
}

/** The voices a TTS model offers Wyoming clients: each with its own language, else the model's. */
export function wyomingVoices(model: TtsModel): { name: string; description: string; languages: string[] }[] {
  const modelLanguages = tagsOf(model.capabilities.languages ?? ['en']);
  return model.voices.map((voice) => ({
    name: voice.id,
    description: voice.name,
    languages: voice.language ? tagsOf([voice.language]) : modelLanguages,
  }));
}

/**
 * `info`'s data. `stt`/`tts`: the model each program serves (its ID) and the model itself when loaded; a model not
 * loaded yet is listed as not installed, with no languages, until it is.
 */
export function wyomingInfo(
  version: string,
  stt: { id: string; model: LoadedModel | null } | null,
  tts: { id: string; model: LoadedModel | null } | null,
): Record<string, unknown> {
  const info: Record<string, unknown> = { asr: [], tts: [], handle: [], intent: [], wake: [], mic: [], snd: [] };
  if (stt) {
    const model = stt.model as SttModel | null;
    const languages = model ? [...(model.capabilities.languages ?? Object.keys(LANGUAGE_NAMES))] : [];
    info.asr = [
      {
        ...artifact('voxd', 'voxd speech-to-text', true, version),
        models: [{ ...artifact(stt.id, model ? `${stt.id} (${model.engine})` : `${stt.id} (loading)`, model !== null, null), languages }],
        supports_transcript_streaming: true,
      },
    ];
  }
  if (tts) {
    const model = tts.model as TtsModel | null;
    const voices = model
      ? wyomingVoices(model).map((voice) => ({ ...artifact(voice.name, voice.description, true, null), languages: voice.languages, speakers: null }))
      : [];
    info.tts = [{ ...artifact('voxd', `voxd text-to-speech (${tts.id})`, true, version), voices, supports_synthesize_streaming: true }];
  }
  return info;
}
