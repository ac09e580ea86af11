/**
 * The Wyoming listener (docs/wyoming.md): a TCP port beside the HTTP API (`--wyoming-port`), serving speech-to-text
 * and text-to-speech to Home Assistant and other Wyoming clients through the same services. Connections beyond
 * `--max-wyoming-connections` are answered with an `error` and closed; the models it serves are loaded when it
 * starts, so that its `info` lists them from the first `describe`.
 */
import net from 'node:net';
import { encodeEvent } from './events.js';
import { WyomingConnection, type WyomingServices } from './connection.js';
import { advertisedReach, advertiseWyoming, type WyomingAdvertisement } from './zeroconf.js';

export interface WyomingServerOptions extends WyomingServices {
  host: string;
  port: number;
  maxConnections: number;
  /** The zeroconf instance name to advertise the listener as, or null not to advertise it. */
  zeroconfName: string | null;
}

export interface RunningWyoming {
  port: number;
  /** Stops listening and closes every connection (the work for them stops). */
  close(): Promise<void>;
}

export async function startWyomingServer(options: WyomingServerOptions): Promise<RunningWyoming> {
  const connections = new Set<WyomingConnection>();
  const server = net.createServer((socket) => {
    socket.setNoDelay(true);
    if (connections.size >= options.maxConnections) {
      const refusal = encodeEvent('error', {
        text: `this server takes at most ${options.maxConnections} Wyoming connections at once (--max-wyoming-connections); retry later`,
        code: 'too_many_connections',
      });
      // sent whole, then closed, whether or not the client closes its side
      socket.on('error', () => socket.destroy());
      socket.end(refusal, () => socket.destroy());
      return;
    }
    const connection = new WyomingConnection(socket, options);
    connections.add(connection);
    socket.once('close', () => connections.delete(connection));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as net.AddressInfo).port;
  // loaded now, so that a describe lists them (it never waits for a load); a failure is the first request's to report
  for (const model of [options.sttModel, options.ttsModel]) {
    if (model !== null)
      options.registry.load(model, { pinned: true }).catch((error: unknown) => options.logger.warn({ model, err: error }, 'wyoming: model failed to load'));
  }
  const advertisement = await advertise(options, port);
  return {
    port,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const connection of connections) connection.close();
      await Promise.all([closed, advertisement?.stop()]);
    },
  };
}

async function advertise(options: WyomingServerOptions, port: number): Promise<WyomingAdvertisement | null> {
  if (options.zeroconfName === null) return null;
  const reach = await advertisedReach(options.host).catch(() => null);
  if (reach === null) {
    options.logger.info({ host: options.host }, `zeroconf: not advertised, the Wyoming listener is bound to ${options.host}, which only this machine reaches`);
    return null;
  }
  return advertiseWyoming({ name: options.zeroconfName, port, reach, version: options.version, logger: options.logger }).catch((error: unknown) => {
    options.logger.warn({ err: error }, 'zeroconf: the Wyoming listener could not be advertised; add it in Home Assistant by host and port');
    return null;
  });
}
