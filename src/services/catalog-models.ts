/**
 * The catalog's entries (src/services/catalog.ts; docs/models.md, "Catalog"). The hub cannot be reached from where
 * voxd is built, so every file name and size here is taken from a public page, cited beside the entry: the hub's own
 * commit or file pages where they give exact bytes, else a byte-identical copy (the same sha256) on another hub
 * repository. `memoryBytes` is the memory the model card or its runtime's README gives, where one does.
 */
import type { CatalogEntry } from './catalog.js';

const WHISPER_REPO = 'ggerganov/whisper.cpp';
/** Memory of whisper.cpp's models, from its README's "Memory usage" table (tiny 273 MB, base 388 MB, small 852 MB). */
const WHISPER_MEMORY = { tiny: 273e6, base: 388e6, small: 852e6 };
/** whisper.cpp's own code and OpenAI's weights. */
const WHISPER_LICENSE = 'MIT';
const WHISPER_CARD = 'https://github.com/ggml-org/whisper.cpp/blob/master/models/README.md';

function whisper(name: string, file: string, bytes: number, memoryBytes: number | null, languages: string, note: string, source: string): CatalogEntry {
  return {
    name,
    id: `${WHISPER_REPO}/${file}`,
    repo: WHISPER_REPO,
    files: [{ path: file, bytes }],
    task: 'stt',
    engine: 'whisper',
    languages,
    ...(memoryBytes === null ? {} : { memoryBytes }),
    license: WHISPER_LICENSE,
    note,
    source,
  };
}

const MULTILINGUAL_WHISPER = '99 languages, with translation to English';

export const CATALOG_MODELS: readonly CatalogEntry[] = [
  // sizes: the LFS pointers of getwavery/ggml-models (huggingface.co/getwavery/ggml-models/commit/236971e8e0afea6670241cbfb3b9a19485e820e0),
  // whose sha256 equal ggerganov/whisper.cpp's own blob pages (huggingface.co/ggerganov/whisper.cpp/blob/refs%2Fpr%2F5/ggml-tiny.en.bin)
  whisper(
    'whisper-tiny.en',
    'ggml-tiny.en.bin',
    77_704_715,
    WHISPER_MEMORY.tiny,
    'English',
    'The smallest Whisper: quick on any CPU, rough on hard audio.',
    WHISPER_CARD,
  ),
  whisper(
    'whisper-base.en',
    'ggml-base.en.bin',
    147_964_211,
    WHISPER_MEMORY.base,
    'English',
    'A small English recognizer that a laptop runs faster than real time.',
    WHISPER_CARD,
  ),
  whisper(
    'whisper-small.en',
    'ggml-small.en.bin',
    487_614_201,
    WHISPER_MEMORY.small,
    'English',
    'Clearly better English than base, still quick on a desktop CPU.',
    WHISPER_CARD,
  ),
  whisper(
    'whisper-base',
    'ggml-base.bin',
    147_951_465,
    WHISPER_MEMORY.base,
    MULTILINGUAL_WHISPER,
    'A small multilingual recognizer; it detects the language.',
    WHISPER_CARD,
  ),
  whisper(
    'whisper-small',
    'ggml-small.bin',
    487_601_967,
    WHISPER_MEMORY.small,
    MULTILINGUAL_WHISPER,
    'A good multilingual recognizer for a CPU.',
    WHISPER_CARD,
  ),
  // huggingface.co/ggerganov/whisper.cpp/commit/98aa99a0a9db05ae2342309f5096248665f7cba3 ("Add Whisper Large v3 Turbo", LFS pointers)
  whisper(
    'whisper-large-v3-turbo',
    'ggml-large-v3-turbo.bin',
    1_624_555_275,
    null,
    MULTILINGUAL_WHISPER,
    "Large-v3's accuracy at several times its speed: the one to take with a GPU.",
    'https://huggingface.co/ggerganov/whisper.cpp/commit/98aa99a0a9db05ae2342309f5096248665f7cba3',
  ),
  whisper(
    'whisper-large-v3-turbo-q5_0',
    'ggml-large-v3-turbo-q5_0.bin',
    574_041_195,
    null,
    MULTILINGUAL_WHISPER,
    'Large-v3 turbo quantised to 5 bits: near its accuracy at a third of the memory.',
    'https://huggingface.co/ggerganov/whisper.cpp/commit/98aa99a0a9db05ae2342309f5096248665f7cba3',
  ),
  // huggingface.co/ggerganov/whisper.cpp/commit/0b364b566045a405be7225ee1e415a073e04da77 ("Add Q8_0 models")
  whisper(
    'whisper-large-v3-turbo-q8_0',
    'ggml-large-v3-turbo-q8_0.bin',
    874_188_075,
    null,
    MULTILINGUAL_WHISPER,
    'Large-v3 turbo quantised to 8 bits: its accuracy at about half the memory.',
    'https://huggingface.co/ggerganov/whisper.cpp/commit/0b364b566045a405be7225ee1e415a073e04da77',
  ),
  {
    name: 'parakeet-v3',
    id: 'ggml-org/parakeet-GGUF/ggml-parakeet-tdt-0.6b-v3-q8_0.bin',
    repo: 'ggml-org/parakeet-GGUF',
    // the repository's files are written by whisper.cpp's scripts/upload-parakeet.py; bytes as pinned by its users
    files: [{ path: 'ggml-parakeet-tdt-0.6b-v3-q8_0.bin', bytes: 668_757_119 }],
    task: 'stt',
    engine: 'parakeet',
    languages: '25 European languages (bg, cs, da, de, el, en, es, et, fi, fr, hr, hu, it, lt, lv, mt, nl, pl, pt, ro, ru, sk, sl, sv, uk)',
    // the card: "at least 2GB RAM for model to load"
    memoryBytes: 2e9,
    license: 'CC-BY-4.0',
    note: 'Fast and accurate on CPU, with punctuation and word times: the recognizer to start with.',
    source: 'https://huggingface.co/nvidia/parakeet-tdt-0.6b-v3',
  },
  {
    name: 'qwen3-asr-0.6b',
    id: 'ggml-org/Qwen3-ASR-0.6B-GGUF:Q8_0',
    repo: 'ggml-org/Qwen3-ASR-0.6B-GGUF',
    // at revision 928ab958557df9aa2ef1c93e0e83c7ad0933fae2 (llama.cpp's docs/multimodal.md lists the repository)
    files: [
      { path: 'Qwen3-ASR-0.6B-Q8_0.gguf', bytes: 804_749_248 },
      { path: 'mmproj-Qwen3-ASR-0.6B-Q8_0.gguf', bytes: 214_392_480 },
    ],
    task: 'stt',
    engine: 'audio-lm',
    languages: '30 languages and 22 Chinese dialects',
    license: 'Apache-2.0',
    note: 'An audio language model: strong on noisy or sung speech and on Chinese.',
    source: 'https://github.com/QwenLM/Qwen3-ASR',
  },
  {
    name: 'qwen3-asr-1.7b',
    id: 'ggml-org/Qwen3-ASR-1.7B-GGUF:Q8_0',
    repo: 'ggml-org/Qwen3-ASR-1.7B-GGUF',
    files: [
      { path: 'Qwen3-ASR-1.7B-Q8_0.gguf', bytes: 2_165_034_944 },
      { path: 'mmproj-Qwen3-ASR-1.7B-Q8_0.gguf', bytes: 355_709_344 },
    ],
    task: 'stt',
    engine: 'audio-lm',
    languages: '30 languages and 22 Chinese dialects',
    license: 'Apache-2.0',
    note: "Qwen3-ASR's larger model: among the most accurate open recognizers, best with a GPU.",
    source: 'https://github.com/QwenLM/Qwen3-ASR',
  },
  {
    name: 'voxtral-mini-3b',
    id: 'ggml-org/Voxtral-Mini-3B-2507-GGUF:Q4_K_M',
    repo: 'ggml-org/Voxtral-Mini-3B-2507-GGUF',
    files: [
      { path: 'Voxtral-Mini-3B-2507-Q4_K_M.gguf', bytes: 2_473_001_920 },
      { path: 'mmproj-Voxtral-Mini-3B-2507-Q8_0.gguf', bytes: 715_714_080 },
    ],
    task: 'stt',
    engine: 'audio-lm',
    languages: '8 languages (en, fr, de, es, it, pt, nl, hi)',
    license: 'Apache-2.0',
    note: "Mistral's audio language model: transcribes and translates long recordings.",
    source: 'https://huggingface.co/mistralai/Voxtral-Mini-3B-2507',
  },
  {
    name: 'pocket-tts',
    // a community conversion by llama.cpp's converter (no ggml-org repository holds Pocket TTS); `:en` picks the
    // English model and its mmproj from the repository's languages
    id: 'EryriLabs/pocket-tts-GGUF:en',
    repo: 'EryriLabs/pocket-tts-GGUF',
    files: [
      { path: 'pocket-tts-en.gguf', bytes: 159_390_816 },
      { path: 'mmproj-pocket-tts-en.gguf', bytes: 59_858_080 },
    ],
    task: 'tts',
    engine: 'ggml-tts',
    languages: 'English',
    license: 'CC-BY-4.0',
    note: "Kyutai's 100M-parameter voice cloner: faster than real time on two CPU cores.",
    source: 'https://huggingface.co/EryriLabs/pocket-tts-GGUF',
  },
  {
    name: 'qwen3-tts-1.7b',
    id: 'ggml-org/Qwen3-TTS-12Hz-1.7B-Base-GGUF:Q8_0',
    repo: 'ggml-org/Qwen3-TTS-12Hz-1.7B-Base-GGUF',
    // llama.cpp's tools/tts/README.md names the repository
    files: [
      { path: 'Qwen3-TTS-12Hz-1.7B-Base-Q8_0.gguf', bytes: 1_847_874_400 },
      { path: 'mmproj-Qwen3-TTS-12Hz-1.7B-Base-Q8_0.gguf', bytes: 446_422_912 },
    ],
    task: 'tts',
    engine: 'ggml-tts',
    languages: '10 languages (zh, en, ja, ko, de, fr, ru, pt, es, it)',
    license: 'Apache-2.0',
    note: 'Clones a voice from 3 seconds of audio, in ten languages; best with a GPU.',
    source: 'https://huggingface.co/Qwen/Qwen3-TTS-12Hz-1.7B-Base',
  },
  {
    name: 'kokoro-82m',
    id: 'hexgrad/Kokoro-82M',
    repo: 'hexgrad/Kokoro-82M',
    // the checkpoint's blob page and the repository's API listing; its 54 voices/*.pt (about 523 kB each) come with it
    files: [
      { path: 'kokoro-v1_0.pth', bytes: 327_212_226 },
      { path: 'config.json', bytes: 2_351 },
    ],
    task: 'tts',
    engine: 'kokoro',
    languages: 'English (American, British), Spanish, French, Hindi, Italian, Japanese, Portuguese, Mandarin',
    license: 'Apache-2.0',
    note: '54 ready voices in 9 languages, natural and quick on a CPU; no cloning.',
    source: 'https://huggingface.co/hexgrad/Kokoro-82M',
  },
  {
    name: 'silero-vad',
    id: 'ggml-org/whisper-vad/ggml-silero-v6.2.0.bin',
    repo: 'ggml-org/whisper-vad',
    // sha256 2aa269b785eeb53a82983a20501ddf7c1d9c48e33ab63a41391ac6c9f7fb6987 (huggingface.co/sigil-build/whisper-vad, a byte copy)
    files: [{ path: 'ggml-silero-v6.2.0.bin', bytes: 885_098 }],
    task: 'vad',
    engine: 'silero-vad',
    languages: 'Any language',
    license: 'MIT',
    note: 'The voice activity detector voxd uses for turns and long audio (its default).',
    source: 'https://huggingface.co/ggml-org/whisper-vad/tree/main',
  },
];
