/**
 * Zeroconf for the Wyoming listener (docs/wyoming.md, "Discovery"): the service `_wyoming._tcp` advertised by mDNS,
 * which Home Assistant browses for and then offers to set up. @homebridge/ciao does the mDNS (RFC 6762/6763: probing,
 * a new name on a conflict, answers on every interface, goodbyes when it ends); it is loaded only when advertising.
 */
import dns from 'node:dns/promises';
import net from 'node:net';
import os from 'node:os';
import type { Logger } from 'pino';

/** What is advertised: on every interface, or on some addresses only. */
export type AdvertisedReach = { addresses: 'all'; ipv6: boolean } | { addresses: string[] };

export interface WyomingAdvertisement {
  /** Says goodbye on the network (Home Assistant drops the discovery) and stops answering queries. */
  stop(): Promise<void>;
}

/**
 * The instance name by default: Home Assistant keys a discovered entry by it, so it is the same at every start on one
 * host. A DNS label of the host's name, without dots (Home Assistant reads the name up to its first dot).
 */
export function defaultZeroconfName(): string {
  const host = os
    .hostname()
    .split('.')[0]!
    .replace(/[^A-Za-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '');
  return host ? `voxd-${host}` : 'voxd';
}

function isLoopback(address: string): boolean {
  return net.isIPv4(address) ? address.startsWith('127.') : address === '::1';
}

/**
 * Where a listener bound to `host` can be reached from the network, or null when only from this machine (a loopback
 * bind is never advertised: a client elsewhere could not connect to it).
 */
export async function advertisedReach(host: string): Promise<AdvertisedReach | null> {
  if (host === '0.0.0.0') return { addresses: 'all', ipv6: false };
  if (host === '::') return { addresses: 'all', ipv6: true };
  const addresses = net.isIP(host) ? [host] : (await dns.lookup(host, { all: true })).map((entry) => entry.address);
  const reachable = addresses.filter((address) => !isLoopback(address));
  return reachable.length > 0 ? { addresses: reachable } : null;
}

/**
 * Starts advertising the listener on `port` as `name`. Probing and announcing go on in the background (about two
 * seconds); a network where mDNS cannot run is logged, and the listener serves on by host and port.
 */
export async function advertiseWyoming(options: {
  name: string;
  port: number;
  reach: AdvertisedReach;
  version: string;
  logger: Logger;
}): Promise<WyomingAdvertisement> {
  const { getResponder } = await import('@homebridge/ciao');
  const { name, port, reach, version, logger } = options;
  const responder = getResponder();
  const service = responder.createService({
    name,
    type: 'wyoming',
    port,
    // never empty: ciao takes its own empty TXT record, heard back, for a conflict and probes again without end
    txt: { program: 'voxd', version },
    ...(reach.addresses === 'all' ? { disabledIpv6: !reach.ipv6 } : { restrictedAddresses: reach.addresses }),
  });
  service.on('name-change', (renamed: string) =>
    logger.warn({ name, renamed }, `zeroconf: another service on the network is called ${name}; advertising as ${renamed}`),
  );
  const advertised = service.advertise().then(
    () => logger.info({ name: service.getFQDN(), port }, `zeroconf: advertising ${service.getFQDN()} (Home Assistant discovers it)`),
    (error: unknown) => logger.warn({ err: error }, 'zeroconf: the Wyoming listener could not be advertised; add it in Home Assistant by host and port'),
  );
  return {
    async stop() {
      await advertised;
      await service.end().catch(() => undefined);
      await service.destroy().catch(() => undefined);
      await responder.shutdown();
    },
  };
}
