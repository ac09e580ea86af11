/**
 * Wyoming's wire format (docs/wyoming.md): an event is a header line of JSON (`type`, and `data_length` and
 * `payload_length` when they follow), then that many bytes of UTF-8 JSON data (merged over any `data` the header holds
 * itself), then that many bytes of payload (PCM audio). Read with limits: a peer that breaks them is refused, never
 * buffered without end.
 */

/** The protocol version voxd writes (the reference implementation's; no reader checks it). */
export const WYOMING_VERSION = '1.8.0';

export interface WyomingEvent {
  type: string;
  data: Record<string, unknown>;
  payload: Buffer | null;
}

export interface EventLimits {
  /** The longest header line (the reference reader's own limit is 64 KiB). */
  headerBytes: number;
  /** The most JSON data after a header. */
  dataBytes: number;
  /** The largest payload (one audio chunk). */
  payloadBytes: number;
}

export const DEFAULT_EVENT_LIMITS: EventLimits = { headerBytes: 64 * 1024, dataBytes: 1024 * 1024, payloadBytes: 4 * 1024 * 1024 };

/** A peer that broke the format or a limit: the connection is answered with an `error` and closed. */
export class WyomingProtocolError extends Error {
  override name = 'WyomingProtocolError';
}

/** One event as bytes: the header, its data as a `data_length` block (never inline), its payload. */
export function encodeEvent(type: string, data: Record<string, unknown> = {}, payload: Buffer | null = null): Buffer {
  const dataBytes = Object.keys(data).length > 0 ? Buffer.from(JSON.stringify(data), 'utf8') : null;
  const header: Record<string, unknown> = { type, version: WYOMING_VERSION };
  if (dataBytes) header.data_length = dataBytes.length;
  if (payload && payload.length > 0) header.payload_length = payload.length;
  return Buffer.concat([
    Buffer.from(`${JSON.stringify(header)}\n`, 'utf8'),
    ...(dataBytes ? [dataBytes] : []),
    ...(payload && payload.length > 0 ? [payload] : []),
  ]);
}

type Pending = { stage: 'header' } | { stage: 'body'; type: string; data: Record<string, unknown>; dataLength: number; payloadLength: number };

/** Events out of a byte stream, as it arrives in any pieces. */
export class EventReader {
  private buffered: Buffer = Buffer.alloc(0);
  private pending: Pending = { stage: 'header' };

  constructor(private readonly limits: EventLimits = DEFAULT_EVENT_LIMITS) {}

  /** The events that `chunk` completes; throws WyomingProtocolError on bytes that are no Wyoming event. */
  push(chunk: Buffer): WyomingEvent[] {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    const events: WyomingEvent[] = [];
    for (;;) {
      const event = this.pending.stage === 'header' ? this.readHeader() : this.readBody(this.pending);
      if (event === 'more') return events;
      if (event) events.push(event);
    }
  }

  /** A header line, when a whole one is in: an event of its own when nothing follows it. */
  private readHeader(): WyomingEvent | null | 'more' {
    const end = this.buffered.indexOf(0x0a);
    if (end < 0) {
      if (this.buffered.length > this.limits.headerBytes) throw new WyomingProtocolError(`an event header is longer than ${this.limits.headerBytes} bytes`);
      return 'more';
    }
    if (end > this.limits.headerBytes) throw new WyomingProtocolError(`an event header is longer than ${this.limits.headerBytes} bytes`);
    const line = this.buffered.subarray(0, end).toString('utf8').trim();
    this.buffered = this.buffered.subarray(end + 1);
    if (line === '') return null;
    const header = parseObject(line, 'an event header');
    if (typeof header.type !== 'string' || header.type === '') throw new WyomingProtocolError('an event header has no type');
    const inline = header.data === undefined || header.data === null ? {} : header.data;
    if (typeof inline !== 'object' || Array.isArray(inline)) throw new WyomingProtocolError(`event ${header.type}: data is not an object`);
    const dataLength = length(header.data_length, 'data_length', this.limits.dataBytes, header.type);
    const payloadLength = length(header.payload_length, 'payload_length', this.limits.payloadBytes, header.type);
    this.pending = { stage: 'body', type: header.type, data: inline as Record<string, unknown>, dataLength, payloadLength };
    return null;
  }

  /** The data and payload that follow a header, when they are all in. */
  private readBody(pending: Extract<Pending, { stage: 'body' }>): WyomingEvent | 'more' {
    if (this.buffered.length < pending.dataLength + pending.payloadLength) return 'more';
    const extra = pending.dataLength > 0 ? parseObject(this.buffered.subarray(0, pending.dataLength).toString('utf8'), `event ${pending.type}'s data`) : {};
    const payload = pending.payloadLength > 0 ? Buffer.from(this.buffered.subarray(pending.dataLength, pending.dataLength + pending.payloadLength)) : null;
    this.buffered = this.buffered.subarray(pending.dataLength + pending.payloadLength);
    this.pending = { stage: 'header' };
    return { type: pending.type, data: { ...pending.data, ...extra }, payload };
  }
}

function parseObject(text: string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new WyomingProtocolError(`${what} is not JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new WyomingProtocolError(`${what} is not a JSON object`);
  return value as Record<string, unknown>;
}

/** A header's `data_length` or `payload_length`: absent or null is 0. */
function length(value: unknown, field: string, limit: number, type: string): number {
  if (value === undefined || value === null) return 0;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) throw new WyomingProtocolError(`event ${type}: ${field} is not a byte count`);
  if (value > limit) throw new WyomingProtocolError(`event ${type}: ${field} ${value} is over the limit of ${limit} bytes`);
  return value;
}
