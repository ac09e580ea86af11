/** The bundled AudioWorklet of pcm-worklet.ts, as source text (ui/build.mjs defines it). */
declare const PCM_WORKLET_SOURCE: string;
