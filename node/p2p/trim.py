"""Leave out of the process the libp2p subsystems that py-libp2p 0.8.1 imports unconditionally and the
node never calls: QUIC, WebSocket, mDNS, UPnP, TLS and SECIO security, AutoTLS (ACME), persistent
peerstores and Prometheus metrics.

`import libp2p` loads about 1,400 modules (~90 MiB RSS, about a second on this machine), most of them
for transports and services the node never turns on: it speaks TCP + Noise + yamux, kad-dht, circuit
relay v2, identify and ping, and passes `new_host` a Noise-only `sec_opt`, TCP listen addresses, and
neither `enable_mDNS`, `enable_upnp`, `enable_autotls` nor a Prometheus exporter. `install()` (run by
`node.p2p` before any libp2p import) puts a finder first on `sys.meta_path` that answers for the
modules in `CUTS` only, each with a stub: an empty module whose every public name is a placeholder
class, so `from m import Name`, `isinstance(x, Name)`, `except Name` and subclassing keep working
(also for a name an upgrade starts importing); calling or instantiating a placeholder raises
`LeftOut`, naming the subsystem.

dnspython (multiaddr's DNS resolver) is told its DNS-over-HTTPS and DNS-over-QUIC features are absent
with its own `dns._features.force` ("provided as a workaround"), so it does not import httpx2, h2 or
aioquic. A module imported before `install()` stays as it is; the finder touches no other module. The
node's features are pinned by tests/labs/swarm/test_trim.py, which also lists what must stay unloaded.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Final, final


class LeftOut(RuntimeError):
    """A libp2p subsystem that the node leaves out (see `node.p2p.trim`) was called."""

    def __init__(self, module: str, name: str, what: str) -> None:
        super().__init__(f"{module}.{name}: libp2p's {what} is left out of sark-node (node/p2p/trim.py)")
        self.module = module
        self.name = name


@dataclass(frozen=True)
class Cut:
    """One subsystem left out.

    Attributes:
        prefix: the module; everything under it is left out too, except `keep`.
        what: the subsystem, and the packages it would load.
        importer: the libp2p 0.8.1 file(s) that import it whether or not it is used.
        keep: modules under `prefix` loaded for real (light; their classes are used in `isinstance`
            and `except` by code the node runs).
    """

    prefix: str
    what: str
    importer: str
    keep: tuple[str, ...] = ()

    def covers(self, name: str) -> bool:
        """Whether this cut answers for module `name`."""
        inside = name == self.prefix or name.startswith(self.prefix + ".")
        return inside and name not in self.keep


CUTS: Final = (
    Cut(
        "libp2p.transport.quic",
        "QUIC transport (aioquic, service_identity, pyOpenSSL)",
        "libp2p/__init__.py (QUICTransport, is_quic_multiaddr), libp2p/custom_types.py (QUICStream)",
        keep=("libp2p.transport.quic", "libp2p.transport.quic.config", "libp2p.transport.quic.exceptions"),
    ),
    Cut(
        "libp2p.transport.websocket",
        "WebSocket transport (trio-websocket, wsproto)",
        "libp2p/transport/__init__.py (WebsocketTransport)",
    ),
    Cut("libp2p.discovery.mdns", "mDNS discovery (zeroconf)", "libp2p/host/basic_host.py (MDNSDiscovery)"),
    Cut("libp2p.discovery.upnp", "UPnP port mapping (miniupnpc)", "libp2p/host/basic_host.py (UpnpManager)"),
    Cut(
        "libp2p.security.tls",
        "TLS security and AutoTLS certificates over ACME (requests, httpx, x509 handling)",
        "libp2p/__init__.py (TLSTransport, for the default sec_opt), libp2p/security/__init__.py, "
        "libp2p/host/basic_host.py (ACMEClient, BrokerClient)",
    ),
    Cut(
        "libp2p.security.secio",
        "SECIO security (deprecated in libp2p)",
        "libp2p/__init__.py (secio.Transport, for the default sec_opt), libp2p/security/__init__.py",
    ),
    Cut(
        "libp2p.peer.persistent",
        "persistent peerstores (SQLite, LevelDB, RocksDB)",
        "libp2p/__init__.py (create_*_peerstore)",
    ),
    Cut(
        "prometheus_client",
        "Prometheus metrics (prometheus_client)",
        "libp2p/metrics/swarm.py (Counter; via libp2p/network/swarm.py), libp2p/rcmgr/prometheus_exporter.py",
    ),
)
DNS_FEATURES_OFF: Final = ("doh", "doq")  # dnspython: DNS over HTTPS (httpx2, h2), over QUIC (aioquic)


@final
class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers for the modules of `CUTS` with a stub module; None (the usual finders) for the rest."""

    def __init__(self, cuts: Sequence[Cut]) -> None:
        self.cuts = tuple(cuts)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        cut = next((c for c in self.cuts if c.covers(fullname)), None)
        if cut is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # the default module object

    def exec_module(self, module: ModuleType) -> None:
        cut = next(c for c in self.cuts if c.covers(module.__name__))
        module.__doc__ = f"Left out by node.p2p.trim: {cut.what}; imported by {cut.importer}."

        def placeholder(name: str) -> type[Exception]:
            if name.startswith("__"):
                raise AttributeError(name)
            stand_in = _stand_in(module.__name__, name, cut.what)
            setattr(module, name, stand_in)
            return stand_in

        module.__getattr__ = placeholder  # type: ignore[method-assign]


def _stand_in(module: str, name: str, what: str) -> type[Exception]:
    """A class that can be imported, subclassed, caught and tested against, but never made or called."""

    def refuse(self: object, *args: object, **kwargs: object) -> None:
        raise LeftOut(module, name, what)

    return type(
        name, (Exception,), {"__init__": refuse, "__module__": module, "__doc__": f"Left out: {what}."}
    )


def install(cuts: Sequence[Cut] = CUTS) -> None:
    """Put the finder first on `sys.meta_path` (once) and turn dnspython's optional transports off."""
    if any(isinstance(finder, _Finder) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, _Finder(cuts))
    try:
        import dns._features
    except ImportError:  # no dnspython: nothing to turn off
        return
    for feature in DNS_FEATURES_OFF:
        dns._features.force(feature, False)


install()

__all__ = ["CUTS", "Cut", "LeftOut", "install"]
