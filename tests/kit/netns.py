"""A network-namespace lab: h1, h2 on a bridge, h3 behind a NAT (shared/notes/faults-and-security.md §2).

```
<p>-h1 10.77.0.11 ─┐
<p>-h2 10.77.0.12 ─┼─ br0 (ns <p>-sw) ── wan0 10.77.0.254 [<p>-nat] lan0 10.77.1.1 ── 10.77.1.13 <p>-h3
                   ┘                     masquerade out, forward policy drop
```

The bridge lives in its own namespace and the veths move out of the root namespace at once, so the
root namespace gets no address or route of the lab. Every lab has its own short prefix (interface
names are at most 15 characters), and `down()` kills whatever still runs in its namespaces first.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final, TypeVar

H1: Final = "10.77.0.11"
H2: Final = "10.77.0.12"
H3: Final = "10.77.1.13"
NAT_WAN: Final = "10.77.0.254"

_NAT_RULES: Final = """\
table ip nat {
  chain post {
    type nat hook postrouting priority 100;
    oifname "wan0" masquerade
  }
}
table ip filt {
  chain fwdchain {
    type filter hook forward priority 0; policy drop;
    ct state established,related accept
    iifname "lan0" oifname "wan0" accept
  }
}
"""


NEEDED_TOOLS = ("ip", "nft", "iptables", "tc")
"""What the lab and its fault injectors run; without them the namespace tests skip, saying which."""


class NetnsRefused(Exception):
    """`ip netns add` (or the lab's set-up) was refused here: not root, or no namespace support."""


class NetLab:
    """Three hosts and a NAT in network namespaces named `<prefix>-h1` ... `<prefix>-nat`.

    Attributes:
        prefix: the per-lab prefix of namespace and interface names.
    """

    def __init__(self, prefix: str | None = None) -> None:
        self.prefix = prefix or f"k{secrets.token_hex(2)}"
        self.h1, self.h2, self.h3 = (f"{self.prefix}-h{i}" for i in (1, 2, 3))
        self.nat, self.sw = f"{self.prefix}-nat", f"{self.prefix}-sw"
        self._made: list[str] = []

    def namespaces(self) -> tuple[str, ...]:
        """Every namespace of the lab, hosts first."""
        return (self.h1, self.h2, self.h3, self.nat, self.sw)

    def exec_prefix(self, ns: str) -> list[str]:
        """The argv prefix that runs a command inside namespace `ns` (the command keeps its pid)."""
        return ["ip", "netns", "exec", ns]

    def up(self) -> None:
        """Create the namespaces, the bridge, the hosts and the NAT.

        Raises:
            NetnsRefused: the first `ip netns add` failed (no root, no namespaces).
        """
        missing = [tool for tool in NEEDED_TOOLS if shutil.which(tool) is None]
        if missing:
            raise NetnsRefused(f"missing {', '.join(missing)} (apt-get install iproute2 nftables iptables)")
        try:
            _ip("netns", "add", self.sw)
        except subprocess.CalledProcessError as exc:
            raise NetnsRefused(exc.stderr.strip() or f"ip netns add exited {exc.returncode}") from exc
        self._made.append(self.sw)
        for ns in self.namespaces()[:-1]:
            _ip("netns", "add", ns)
            self._made.append(ns)
        for ns in self.namespaces():
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", self.sw, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.sw, "link", "set", "br0", "up")
        p = self.prefix
        self._plug(self.h1, f"{H1}/24", f"{p}1")
        self._plug(self.h2, f"{H2}/24", f"{p}2")
        self._plug(self.nat, f"{NAT_WAN}/24", f"{p}n", "wan0")
        self._behind_nat(f"v{p}3", f"p{p}3")
        _run(["ip", "netns", "exec", self.nat, "sysctl", "-qw", "net.ipv4.ip_forward=1"])
        _run(["ip", "netns", "exec", self.nat, "nft", "-f", "-"], stdin=_NAT_RULES)

    def _plug(self, ns: str, addr: str, tag: str, ifname: str = "eth0") -> None:
        _ip("link", "add", f"v{tag}", "type", "veth", "peer", "name", f"s{tag}")
        _ip("link", "set", f"v{tag}", "netns", ns)
        _ip("link", "set", f"s{tag}", "netns", self.sw)
        _ip("-n", ns, "link", "set", f"v{tag}", "name", ifname)
        _ip("-n", ns, "addr", "add", addr, "dev", ifname)
        _ip("-n", ns, "link", "set", ifname, "up")
        _ip("-n", self.sw, "link", "set", f"s{tag}", "master", "br0")
        _ip("-n", self.sw, "link", "set", f"s{tag}", "up")

    def _behind_nat(self, host_end: str, nat_end: str) -> None:
        _ip("link", "add", host_end, "type", "veth", "peer", "name", nat_end)
        _ip("link", "set", host_end, "netns", self.h3)
        _ip("link", "set", nat_end, "netns", self.nat)
        _ip("-n", self.h3, "link", "set", host_end, "name", "eth0")
        _ip("-n", self.h3, "addr", "add", f"{H3}/24", "dev", "eth0")
        _ip("-n", self.h3, "link", "set", "eth0", "up")
        _ip("-n", self.h3, "route", "add", "default", "via", "10.77.1.1")
        _ip("-n", self.nat, "link", "set", nat_end, "name", "lan0")
        _ip("-n", self.nat, "addr", "add", "10.77.1.1/24", "dev", "lan0")
        _ip("-n", self.nat, "link", "set", "lan0", "up")

    def down(self) -> None:
        """Kill every process left in the lab's namespaces, then delete them (never raises)."""
        for ns in reversed(self._made):
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, check=False)
            for pid in pids.stdout.split():
                subprocess.run(["kill", "-9", pid], capture_output=True, check=False)
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        self._made.clear()


@contextmanager
def net_lab() -> Iterator[NetLab]:
    """A lab that is always torn down, even when set-up fails half-way."""
    lab = NetLab()
    try:
        lab.up()
        yield lab
    finally:
        lab.down()


def _ip(*args: str) -> None:
    _run(["ip", *args])


def _run(argv: list[str], stdin: str | None = None) -> None:
    subprocess.run(argv, input=stdin, capture_output=True, text=True, check=True, timeout=30)


LabT = TypeVar("LabT", bound=NetLab)


def running(net: LabT) -> Iterator[LabT]:
    """Bring a lab up for one test and always tear it down; skip the test, saying why, where refused."""
    import pytest

    try:
        try:
            net.up()
        except NetnsRefused as exc:
            pytest.skip(f"network namespace lab refused here (needs root, `ip netns`, nft): {exc}")
        yield net
    finally:
        net.down()
