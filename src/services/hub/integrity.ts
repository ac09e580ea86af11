/**
 * What a blob must hash to. Its name in blobs/ is the ETag the hub gave: the sha256 of an LFS file's content, or for
 * any other file its git blob id, the sha1 of `blob <size>\0` followed by the content.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { SHA1_HEX, SHA256_HEX } from './cache-layout.js';

export interface BlobHash {
  algorithm: 'sha256' | 'git blob sha1';
  digest: string;
}

/** The hash an ETag (a blob's name) stands for; null when it is no hash this client knows. */
export function blobHashOf(etag: string): BlobHash | null {
  if (SHA256_HEX.test(etag)) return { algorithm: 'sha256', digest: etag };
  if (SHA1_HEX.test(etag)) return { algorithm: 'git blob sha1', digest: etag };
  return null;
}

/** How `file` differs from `expected` (null when it matches, or nothing is expected). */
export async function hashMismatch(file: string, expected: BlobHash | null): Promise<string | null> {
  if (expected === null) return null;
  const hash = createHash(expected.algorithm === 'sha256' ? 'sha256' : 'sha1');
  if (expected.algorithm === 'git blob sha1') hash.update(`blob ${(await fsp.stat(file)).size}\0`);
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  const actual = hash.digest('hex');
  return actual === expected.digest ? null : `${expected.algorithm} ${actual} instead of the ${expected.digest} the hub announced`;
}
