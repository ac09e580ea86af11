/**
 * Every fuzz target, by name, in the order `npm run fuzz` runs them. A target is made fresh for each run; add one
 * here (a factory returning a FuzzTarget) and the runner, `--target` and the replay of its crashers pick it up.
 */
import { abortMixTarget } from './abort-mix.js';
import { audioFileTarget } from './audio-file.js';
import { fliteTextTarget } from './flite-text.js';
import { httpRequestTarget } from './http-request.js';
import { realtimeEventsTarget } from './realtime-events.js';
import type { FuzzTarget } from './target.js';

export const TARGETS: Readonly<Record<string, () => FuzzTarget<unknown>>> = {
  'flite-text': fliteTextTarget,
  'http-request': httpRequestTarget,
  'audio-file': audioFileTarget,
  'realtime-events': realtimeEventsTarget,
  'abort-mix': abortMixTarget,
};
