"""Issue 49, scope 1: a submitter's own embedded workers (`submit --workers N`) are not challenged:
their profile is its own probe's calibration, taken in its own process. Only the peers whose keys
are in its data folder's embedded swarm are; any other peer is challenged as ever."""

from __future__ import annotations

from pathlib import Path

import trio

import scheduler as sch
from node.config import NodeConfig
from node.errors import PeerUnreachable
from node.p2p.identity import identity_peer_id
from node.p2p.wire import Channel
from node.submitter.challenge import Challenger
from node.submitter.run import own_workers
from protocol import Calibration, ComputeUnit, DeviceProfile, UnitStatus

KEY = sch.DrawKey(bytes(range(32)))


def _view(peer: str) -> sch.PeerView:
    profile = DeviceProfile(
        device_name="w", soc="cpu", cores_physical=1, cores_logical=2, ram_mb=1024, os="Linux",
        os_version="6", fingerprint="f" * 16,
        units=(UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),),
        calibration=Calibration(cpu_gflops=1e4, mem_bandwidth_gbs=10.0, seconds=1.0),
    )  # fmt: skip
    return sch.PeerView(peer_id=peer, profile=profile, host="127.0.0.1")


def test_own_workers_are_the_embedded_swarms_keys_in_this_data_folder(tmp_path: Path) -> None:
    config = NodeConfig(data_dir=tmp_path / "me")
    assert own_workers(config) == frozenset()
    ids = {identity_peer_id(config.data.embedded(f"worker-{i}") / "identity.key") for i in range(2)}
    identity_peer_id(config.data.embedded("gate") / "identity.key")  # the gate is no worker
    identity_peer_id(tmp_path / "other" / "identity.key")  # nor a key of another folder
    assert own_workers(config) == frozenset(ids)


async def test_an_own_worker_is_not_challenged_and_any_other_peer_is() -> None:
    """Both claim 10 TFLOPS on a CPU: the own worker's stands unchallenged (no stream opened to it);
    the other's challenge is opened, and, unanswered here, leaves it unverified for this round."""
    opened: list[str] = []

    async def refuse(peer: str, addrs: tuple[str, ...], protocol: str) -> Channel:
        opened.append(peer)
        raise PeerUnreachable(peer, "no such peer here")

    challenger = Challenger(KEY, refuse, own=frozenset({"mine"}))
    with trio.fail_after(60):
        mine, other = await challenger.vouch([_view("mine"), _view("other")], lambda _: ())
    assert mine.claim == ()
    assert opened == ["other"]
    (why,) = other.claim
    assert why.startswith("challenge: not answered: "), why
