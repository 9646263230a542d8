"""Pinning a campaign's models on the submitter: every device measures the same bytes."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

import scheduler as sch
from node.errors import ConfigError, disk_errors, megabytes
from node.transfer.cache import ModelCache
from node.transfer.fetch import UrlPolicy, download
from protocol import ModelRef

UNKNOWN_SHA256 = "0" * 64


class ModelSourceError(ConfigError):
    """A campaign's model cannot be used: the path is missing, or the pinned digest disagrees (bad input)."""


async def pin_models(
    campaign: sch.Campaign, base_dir: Path, cache: ModelCache, policy: UrlPolicy, *, fetch: bool = True
) -> dict[str, ModelRef]:
    """A ModelRef per campaign model: local files hashed into the cache (served over /sark/blob);
    URLs without a sha256 downloaded once to pin them (unless `fetch` is off, for dry runs)."""
    pinned: dict[str, ModelRef] = {}
    for index, source in enumerate(campaign.models):
        field = "model" if len(campaign.models) == 1 else f"models[{index}]"
        if source.path is not None:
            pinned[source.key] = await _pin_path(source, base_dir, cache, field)
        elif source.sha256 is not None or not fetch:
            pinned[source.key] = ModelRef(
                name=source.name,
                size=0,
                sha256=source.sha256 or UNKNOWN_SHA256,
                format=source.format,
                sources=(source.url or "",),
            )
        else:
            assert source.url is not None
            with (
                disk_errors(cache.root, f"storing model {source.name} from {source.url}"),
                tempfile.TemporaryDirectory(dir=cache.root) as scratch,
            ):
                temp = Path(scratch) / "download"
                sha256, size = await download(source.url, temp, sha256=None, policy=policy)
                await trio.to_thread.run_sync(cache.commit, sha256, temp)
            pinned[source.key] = ModelRef(
                name=source.name, size=size, sha256=sha256, format=source.format, sources=(source.url,)
            )
    return pinned


async def _pin_path(source: sch.ModelSource, base_dir: Path, cache: ModelCache, field: str) -> ModelRef:
    assert source.path is not None
    path = (base_dir / source.path).resolve()
    if not path.is_file():
        raise ModelSourceError(f"{field}.path", f"no such file: {path}")
    with disk_errors(cache.root, f"storing model {path.name} ({megabytes(path.stat().st_size)})"):
        sha256, stored = await trio.to_thread.run_sync(cache.add_file, path)
    if source.sha256 is not None and source.sha256 != sha256:
        raise ModelSourceError(
            f"{field}.sha256", f"the file's sha256 is {sha256}, the campaign pins {source.sha256}"
        )
    return ModelRef(name=source.name, size=stored.stat().st_size, sha256=sha256, format=source.format)


def models_json(models: Mapping[str, ModelRef]) -> dict[str, Any]:
    """The pinned models as the campaign store keeps them."""
    return {key: ref.model_dump(mode="json") for key, ref in models.items()}


def refs_from_json(models: Mapping[str, object]) -> dict[str, ModelRef]:
    """The pinned models back from the campaign store."""
    return {key: ModelRef.model_validate(value) for key, value in models.items()}
