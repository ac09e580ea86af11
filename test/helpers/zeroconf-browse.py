"""Browses for Wyoming services with python-zeroconf, the mDNS library Home Assistant discovers them with.

    /usr/bin/python3 zeroconf-browse.py

Prints one JSON line per change: {"event": "ready"} once browsing, then {"event": "added", "name", "port",
"addresses"} when a service is resolved and {"event": "removed", "name"} when it says goodbye; stops when stdin
closes (test/helpers/wyoming.ts runs it).
"""

import ipaddress
import json
import sys
import time

from zeroconf import IPVersion, ServiceBrowser, ServiceStateChange, Zeroconf

SERVICE_TYPE = "_wyoming._tcp.local."
RESOLVE_TIMEOUT_MS = 3000


def say(event):
    print(json.dumps(event), flush=True)


def on_change(zeroconf, service_type, name, state_change):
    if state_change is ServiceStateChange.Removed:
        say({"event": "removed", "name": name})
        return
    info = zeroconf.get_service_info(service_type, name, RESOLVE_TIMEOUT_MS)
    if info is None:
        return
    # the first answer may come from the loopback interface alone; the other interfaces' address records follow
    # (the test connects where a Home Assistant on another machine would: a routable address)
    deadline = time.monotonic() + RESOLVE_TIMEOUT_MS / 1000
    while not any(not ipaddress.ip_address(a).is_loopback for a in info.parsed_addresses()) and time.monotonic() < deadline:
        time.sleep(0.1)
        info.load_from_cache(zeroconf)
    say({"event": "added", "name": name, "port": info.port, "addresses": info.parsed_addresses()})


def main():
    zeroconf = Zeroconf(ip_version=IPVersion.All)
    browser = ServiceBrowser(zeroconf, SERVICE_TYPE, handlers=[on_change])
    say({"event": "ready"})
    sys.stdin.read()
    browser.cancel()
    zeroconf.close()


main()
