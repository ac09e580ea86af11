// One function per binding file: each exports its engine's JS classes and functions on the addon's exports
// (addon.cpp calls them all; src/native/ types what they export).
#pragma once

#include <napi.h>

// JS: `decodeAudio(data: Uint8Array, { sampleRate, channels?, maxSeconds? }, abort?: AbortFlag) -> Promise<DecodedAudio>`.
void voxd_bind_decoder(Napi::Env env, Napi::Object exports);
// JS: `AudioEncoder` (encoder-binding.cpp).
void voxd_bind_encoder(Napi::Env env, Napi::Object exports);
// JS: `new Resampler({ inputRate, outputRate })`, `.process(Float32Array | Int16Array) -> Float32Array`,
// `.flush() -> Float32Array`, `.reset()`, `.inputRate`, `.outputRate`.
void voxd_bind_resampler(Napi::Env env, Napi::Object exports);
// JS: `separate(channels: Float32Array[], { sampleRate, method }, abort?) -> Promise<Float32Array[]>`.
void voxd_bind_separator(Napi::Env env, Napi::Object exports);
// JS: `diarize(samples: Float32Array, speech: Float64Array, references: Float32Array[], { minSpeakers?, maxSpeakers? },
// abort?) -> Promise<{ turns: Float64Array (start, end, speaker triples), speakers, references: Int32Array }>`.
void voxd_bind_diarizer(Napi::Env env, Napi::Object exports);
// JS: `VadModel` and `VadStream` (vad-binding.cpp).
void voxd_bind_vad(Napi::Env env, Napi::Object exports);
// JS: `SphinxModel` and `SphinxStream` (sphinx-binding.cpp); pocketsphinx itself is opened by the first load.
void voxd_bind_sphinx(Napi::Env env, Napi::Object exports);
// JS: `FliteModel` (flite-binding.cpp); flite itself is opened by the first load.
void voxd_bind_flite(Napi::Env env, Napi::Object exports);
// JS: `WhisperModel` (whisper-binding.cpp).
void voxd_bind_whisper(Napi::Env env, Napi::Object exports);
// JS: `ParakeetModel` (parakeet-binding.cpp).
void voxd_bind_parakeet(Napi::Env env, Napi::Object exports);
// JS: `AudioLmModel` (audio-lm-binding.cpp).
void voxd_bind_audio_lm(Napi::Env env, Napi::Object exports);
// JS: `TtsGgmlModel` and the `TtsGgmlBatch` class its sessions are (tts-ggml-binding.cpp).
void voxd_bind_tts_ggml(Napi::Env env, Napi::Object exports);
// JS: `KokoroModel` (kokoro-binding.cpp).
void voxd_bind_kokoro(Napi::Env env, Napi::Object exports);
