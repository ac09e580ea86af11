/**
 * The transport the HTTP and WebSocket tests run on: VOXD_TRANSPORT (`uws`, `node`), else voxd's own choice
 * (`auto`). `npm test` runs those suites once more on node:http (scripts/test.mjs).
 */
import { TRANSPORT_PREFERENCES, type TransportPreference } from '../../src/config.js';
import { createTransport } from '../../src/http/transports.js';
import type { Transport, TransportLimits } from '../../src/http/transport.js';

export function transportUnderTest(): TransportPreference {
  const wanted = process.env.VOXD_TRANSPORT ?? 'auto';
  if (!(TRANSPORT_PREFERENCES as readonly string[]).includes(wanted)) throw new Error(`VOXD_TRANSPORT=${wanted}: use ${TRANSPORT_PREFERENCES.join(', ')}`);
  return wanted as TransportPreference;
}

/** A fresh transport of the kind under test, for servers a test builds itself. */
export function testTransport(limits: TransportLimits = {}): Transport {
  return createTransport(transportUnderTest(), limits).transport;
}
