/**
 * Picks the transport at start: uWebSockets.js when its native binary loads for this Node ABI and libc (it is the
 * faster one), else node:http; `--transport` forces either. The choice is named in the start-up log line.
 */
import type { TransportPreference } from '../config.js';
import { createNodeTransport } from './node-transport.js';
import type { Transport, TransportLimits } from './transport.js';
import { loadUws } from './uws.js';
import { createUwsTransport } from './uws-transport.js';

/** The transport, and why uWS is not it when it could have been (null when it is, or node was asked for). */
export function createTransport(preference: TransportPreference, limits: TransportLimits = {}): { transport: Transport; uwsUnavailable: string | null } {
  if (preference === 'node') return { transport: createNodeTransport(limits), uwsUnavailable: null };
  try {
    return { transport: createUwsTransport(loadUws()), uwsUnavailable: null };
  } catch (error) {
    if (preference === 'uws') throw error;
    return { transport: createNodeTransport(limits), uwsUnavailable: error instanceof Error ? error.message : String(error) };
  }
}
