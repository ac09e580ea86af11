/** Audio sent inside a JSON or form field as a base64 `data:` URL (`ref_audio`, `known_speaker_references[]`). */

const DATA_URL = /^data:([\w.+-]+\/[\w.+-]+)?(;[\w-]+=[^;,]*)*;base64,/i;

/** The bytes of a base64 data URL, or null when `value` is not one. */
export function dataUrlBytes(value: string): Buffer | null {
  const head = DATA_URL.exec(value);
  return head ? Buffer.from(value.slice(head[0].length), 'base64') : null;
}
