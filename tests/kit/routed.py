"""A namespace lab of three routed networks, one /24 each, joined by a router namespace: where the
submitter's network rule (one vote per IPv4 /24, `scheduler/verification/networks.py`) is under test.

```
<p>-h1 10.77.0.11/24 ── 10.77.0.1 ┐
<p>-h2 10.78.0.12/24 ── 10.78.0.1 ┼─ [<p>-r] ip_forward, no NAT
<p>-h3 10.79.0.13/24 ── 10.79.0.1 ┘
```

Every host reaches every other at its own address (routed, not masqueraded), so the submitter sees
each peer on its own /24. Like `netns.NetLab` (whose teardown it keeps), the veths move out of the
root namespace at once: the root namespace gets no address or route of the lab.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from kit.dhtservers import write_seed
from kit.netns import NetLab, NetnsRefused, _ip, _run
from kit.procs import Lab, Proc

HOSTS: Final = {
    "h1": ("10.77.0.11", "10.77.0.1"),
    "h2": ("10.78.0.12", "10.78.0.1"),
    "h3": ("10.79.0.13", "10.79.0.1"),
}
"""Each host's address and its router leg (its default gateway), on a /24 of its own."""
NETWORKS: Final = {name: f"{addr.rsplit('.', 2)[0]}.0.0/24" for name, (addr, _) in HOSTS.items()}
"""Each host's network as the submitter counts it (`network_of`: its /24)."""


class RoutedNet(NetLab):
    """Hosts `<prefix>-h1` ... `-h3` on three networks and the router `<prefix>-r` between them
    (`hosts`: others, each name's address and router leg on a /24 of its own, in `<prefix>-<name>`)."""

    def __init__(self, prefix: str | None = None, hosts: Mapping[str, tuple[str, str]] = HOSTS) -> None:
        super().__init__(prefix)
        self.router = f"{self.prefix}-r"
        self.hosts = dict(hosts)

    def ns(self, host: str) -> str:
        """The namespace of host `host` (a key of `hosts`)."""
        return f"{self.prefix}-{host}"

    def namespaces(self) -> tuple[str, ...]:
        return (*(self.ns(h) for h in self.hosts), self.router)

    def up(self) -> None:
        """Create the router and the hosts, each on its own veth and /24.

        Raises:
            NetnsRefused: no `ip`, or the first `ip netns add` failed (no root, no namespaces).
        """
        if shutil.which("ip") is None:
            raise NetnsRefused("missing ip (apt-get install iproute2)")
        try:
            _ip("netns", "add", self.router)
        except subprocess.CalledProcessError as exc:
            raise NetnsRefused(exc.stderr.strip() or f"ip netns add exited {exc.returncode}") from exc
        self._made.append(self.router)
        for ns in (self.ns(h) for h in self.hosts):
            _ip("netns", "add", ns)
            self._made.append(ns)
        for ns in self.namespaces():
            _ip("-n", ns, "link", "set", "lo", "up")
        for i, (host, (addr, gateway)) in enumerate(self.hosts.items()):
            self._leg(self.ns(host), addr, gateway, f"{self.prefix}{i}")
        _run(["ip", "netns", "exec", self.router, "sysctl", "-qw", "net.ipv4.ip_forward=1"])

    def _leg(self, ns: str, addr: str, gateway: str, tag: str) -> None:
        host_end, router_end = f"v{tag}", f"r{tag}"
        _ip("link", "add", host_end, "type", "veth", "peer", "name", router_end)
        _ip("link", "set", host_end, "netns", ns)
        _ip("link", "set", router_end, "netns", self.router)
        _ip("-n", ns, "link", "set", host_end, "name", "eth0")
        _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "route", "add", "default", "via", gateway)
        _ip("-n", self.router, "addr", "add", f"{gateway}/24", "dev", router_end)
        _ip("-n", self.router, "link", "set", router_end, "up")


DHT_SERVERS: Final = Path(__file__).with_name("dhtservers.py")
"""The hostile-server labs' DHT servers of this code (honest, hostile, providers): a script."""
WALKER: Final = Path(__file__).with_name("walker.py")
"""The hostile-server labs' asker: a node of this code that walks to a key and looks up providers."""


def swarm_hosts(honest: int, hostile: int) -> dict[str, tuple[str, str]]:
    """The hostile-server labs' hosts (`RoutedNet(hosts=...)`), each on a /24 of its own: the gate,
    the asker ("walker"), the honest networks `o0`... and the hostile `x0`...: each name's address and
    router leg."""
    return {
        "gate": ("10.80.0.2", "10.80.0.1"),
        "walker": ("10.81.0.2", "10.81.0.1"),
        **{f"o{i}": (f"10.8{2 + i}.0.2", f"10.8{2 + i}.0.1") for i in range(honest)},
        **{f"x{i}": (f"10.9{i}.0.2", f"10.9{i}.0.1") for i in range(hostile)},
    }


class SwarmLab:
    """The hostile-server labs' processes on a `RoutedNet` of `swarm_hosts`: a `sark-node gate` on host
    "gate" (`gate`: its address), then DHT servers of this code (`servers`) and the asker (`walker`) on
    the hosts named, each in its host's namespace; `close()` kills them all."""

    def __init__(self, net: RoutedNet, root: Path, gate_seed: bytes | None = None) -> None:
        """`gate_seed`: the gate's identity (its key file written first; a fresh one when None)."""
        self.net, self.root, self.lab = net, root, Lab(root)
        if gate_seed is not None:
            write_seed(root / "gate", gate_seed)
        try:
            listen = f"/ip4/{net.hosts['gate'][0]}/tcp/0"
            self.gate: str = self.lab.gate("gate", listen=listen, ns=net.ns("gate")).ready["addrs"][0]
        except BaseException:
            self.lab.close()
            raise

    def servers(self, name: str, host: str, *flags: str) -> Proc:
        """A `DHT_SERVERS` process on `host` (`flags`: its own, as `--servers 4` or `--providers 2`)."""
        data = ["--data-dir", str(self.root / name), "--listen", self.net.hosts[host][0]]
        argv = [sys.executable, str(DHT_SERVERS), "--gate", self.gate, *data, *flags]
        return self.lab.start(name, argv, ns=self.net.ns(host))

    def walker(self, key: bytes, *flags: str, name: str = "walker") -> Proc:
        """The asker (`WALKER`) on host "walker", to `key` (`flags`: as `--walks 12`; `name`: its process's
        and data folder's, a fresh one for each asker of a lab)."""
        data = ["--data-dir", str(self.root / name), "--listen", self.net.hosts["walker"][0]]
        argv = [sys.executable, str(WALKER), "--gate", self.gate, *data, "--key", key.hex(), *flags]
        return self.lab.start(name, argv, ns=self.net.ns("walker"))

    def close(self) -> None:
        self.lab.close()
