/**
 * The uWebSockets.js native binary, loaded explicitly: the package's own loader silently falls back to a slow
 * pure-JS implementation when the binary does not load, which we never want. It ships binaries for a few Node ABIs
 * only (Node 20 among the supported lines); where none loads, voxd uses its node:http transport (transport.ts).
 */
import { createRequire } from 'node:module';
import type * as Uws from '@trufflesuite/uws-js-unofficial';

export type { HttpRequest as UwsRequest, HttpResponse as UwsResponse, us_listen_socket as UwsListenSocket, WebSocket } from '@trufflesuite/uws-js-unofficial';

export type UwsModule = typeof Uws;

/** `close()` (closes every socket of the app) exists in the native binary but is missing from the bundled typings. */
export type UwsApp = Uws.TemplatedApp & { close(): void };

/** The binary for this platform and Node ABI; throws, saying why, when there is none or it does not load. */
export function loadUws(): UwsModule {
  const binary = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  try {
    return createRequire(import.meta.url)(`@trufflesuite/uws-js-unofficial/binaries/${binary}`) as UwsModule;
  } catch (error) {
    throw new Error(
      `uWebSockets.js cannot run on ${process.platform}-${process.arch} with Node ${process.version} (ABI ${process.versions.modules}): ` +
        `its native binary ${binary} is missing or does not load (${error instanceof Error ? error.message : String(error)})`,
      { cause: error },
    );
  }
}
