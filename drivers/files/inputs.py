"""Model inputs synthesised from a model's signature, with per-task overrides.

Dynamic dimensions get sane defaults: the first (batch) is 1, the spatial pair of a rank-4 input is
224 x 224 with 3 channels, anything else 64. Floating inputs are seeded normal noise, integer inputs
zeros (safe for embedding lookups), booleans false. A task may override any input's shape and fill
any input with a constant, or give it from a campaign file (`InputData`: an .npy per input or one
.npz by input name), parsed here in the child with `allow_pickle=False` and size limits, and checked
against the input's type and static dimensions. `fed` describes exactly what was fed (shape, type,
fill, the dimensions that got a default, the file and its digest), and every result carries it.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from drivers.errors import TaskFailed
from protocol import FailureReason, InputData, InputFed

BATCH: Final = 1
SPATIAL: Final = 224
CHANNELS: Final = 3
OTHER: Final = 64
SEED: Final = 0
MAX_NPZ_BYTES: Final = 256 << 20
"""Decoded bytes of an .npz's arrays in all: a small zip may inflate to far more."""
MAX_NPZ_MEMBERS: Final = 64

Dim = int | str | None


@dataclass(frozen=True)
class InputSig:
    """One model input as the runtime declares it.

    Attributes:
        name: the input's name.
        dtype: a numpy dtype name ("float32", "int64", "bool", ...).
        shape: static sizes as ints, dynamic ones as a symbol name or None; None when the runtime
            does not declare the rank (TorchScript), so the task must give the shape.
    """

    name: str
    dtype: str
    shape: tuple[Dim, ...] | None


def default_dim(position: int, rank: int) -> int:
    """The size given to a dynamic dimension at `position` of an input of `rank`."""
    if position == 0:
        return BATCH
    if rank == 4:
        return CHANNELS if position == 1 else SPATIAL
    return OTHER


def resolve_shape(sig: InputSig, override: Sequence[int] | None) -> tuple[int, ...]:
    """The concrete shape of one input: the override if given (checked against static dims), else defaults.

    Raises:
        TaskFailed: INPUT when an override contradicts the model's rank or a static dimension.
    """
    if sig.shape is None:
        if override is None:
            raise TaskFailed(
                FailureReason.INPUT, f"input {sig.name!r}: the model declares no shape; give input_shapes"
            )
        return tuple(override)
    if override is None:
        return tuple(
            d if isinstance(d, int) and d >= 0 else default_dim(i, len(sig.shape))
            for i, d in enumerate(sig.shape)
        )
    shape = tuple(override)
    if len(shape) != len(sig.shape):
        raise TaskFailed(
            FailureReason.INPUT,
            f"input {sig.name!r}: override {list(shape)} has rank {len(shape)}, model has {len(sig.shape)}",
        )
    for i, (want, got) in enumerate(zip(sig.shape, shape, strict=True)):
        if isinstance(want, int) and want >= 0 and want != got:
            raise TaskFailed(
                FailureReason.INPUT,
                f"input {sig.name!r}: dimension {i} is fixed at {want}, override gives {got}",
            )
    return shape


def defaulted_dims(sig: InputSig, override: Sequence[int] | None) -> tuple[int, ...]:
    """The positions of `sig`'s dynamic dimensions that got a default size (none when overridden)."""
    if override is not None or sig.shape is None:
        return ()
    return tuple(i for i, d in enumerate(sig.shape) if not (isinstance(d, int) and d >= 0))


def fed(
    sigs: Sequence[InputSig],
    feeds: Mapping[str, npt.NDArray[np.generic]],
    shapes: Mapping[str, Sequence[int]] | None = None,
    values: Mapping[str, float] | None = None,
    data: Sequence[InputData] = (),
) -> tuple[InputFed, ...]:
    """What `synthesize` fed each input, for the result: shape, dtype, fill and defaulted dimensions."""
    shapes = shapes or {}
    values = values or {}
    described = []
    for s in sigs:
        array = feeds[s.name]
        source = _source_of(s.name, data)
        if source is not None:
            described.append(_from_file(s.name, array, source))
            continue
        kind = array.dtype.kind
        fill = (
            "constant"
            if s.name in values
            else "seeded_normal"
            if kind == "f"
            else "false"
            if kind == "b"
            else "zeros"
        )
        described.append(
            InputFed(
                name=s.name,
                dtype=str(array.dtype),
                shape=tuple(int(d) for d in array.shape),
                fill=fill,
                defaulted_dims=defaulted_dims(s, shapes.get(s.name)),
            )
        )
    return tuple(described)


def fed_shapes(
    sigs: Sequence[InputSig],
    shapes: Mapping[str, Sequence[int]] | None = None,
    data: Sequence[InputData] = (),
) -> dict[str, tuple[int, ...]]:
    """The shape each input will be fed (`synthesize`'s): an input file's array's, else the job's
    override or the documented defaults, so a runtime can compile for them before any feed exists.

    Raises:
        TaskFailed: INPUT, as `synthesize` would.
    """
    given = from_files(sigs, data)
    shapes = shapes or {}
    return {
        s.name: tuple(given[s.name].shape) if s.name in given else resolve_shape(s, shapes.get(s.name))
        for s in sigs
    }


def synthesize(
    sigs: Sequence[InputSig],
    shapes: Mapping[str, Sequence[int]] | None = None,
    values: Mapping[str, float] | None = None,
    data: Sequence[InputData] = (),
) -> dict[str, npt.NDArray[np.generic]]:
    """Build one feed per input, ready to pass to the runtime on every run.

    Args:
        sigs: the model's inputs.
        shapes: per-input shape overrides.
        values: per-input constant fills.
        data: the campaign's input files; their arrays are fed as they are.

    Returns:
        Arrays keyed by input name.

    Raises:
        TaskFailed: INPUT for an override naming no input, a bad shape, or an unsupported dtype; for
            an input file that cannot be read safely, names no input, or disagrees with the model.
    """
    shapes = shapes or {}
    values = values or {}
    names = {s.name for s in sigs}
    unknown = sorted((set(shapes) | set(values)) - names)
    if unknown:
        raise TaskFailed(
            FailureReason.INPUT, f"overrides name unknown inputs {unknown}; model inputs are {sorted(names)}"
        )
    given = from_files(sigs, data)
    both = sorted(set(given) & (set(shapes) | set(values)))
    if both:
        raise TaskFailed(FailureReason.INPUT, f"inputs {both} are given by a file and by input_shapes/values")
    rng = np.random.default_rng(SEED)
    return {
        s.name: given[s.name]
        if s.name in given
        else _array(s, resolve_shape(s, shapes.get(s.name)), values.get(s.name), rng)
        for s in sigs
    }


def _array(
    sig: InputSig, shape: tuple[int, ...], fill: float | None, rng: np.random.Generator
) -> npt.NDArray[np.generic]:
    try:
        dtype = np.dtype(sig.dtype)
    except TypeError as exc:
        raise TaskFailed(FailureReason.INPUT, f"input {sig.name!r}: unsupported type {sig.dtype!r}") from exc
    if dtype.kind not in "fiub":
        raise TaskFailed(FailureReason.INPUT, f"input {sig.name!r}: unsupported type {sig.dtype!r}")
    if fill is not None:
        return np.full(shape, fill, dtype=dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape, dtype=np.float32).astype(dtype)
    return np.zeros(shape, dtype=dtype)


def from_files(sigs: Sequence[InputSig], data: Sequence[InputData]) -> dict[str, npt.NDArray[np.generic]]:
    """The arrays the campaign's files give, by input name, each checked against the model's input."""
    by_name = {s.name: s for s in sigs}
    arrays: dict[str, npt.NDArray[np.generic]] = {}
    for item in data:
        for name, array in _read(item).items():
            sig = by_name.get(name)
            if sig is None:
                raise TaskFailed(
                    FailureReason.INPUT,
                    f"input data {item.file!r}: array {name!r} names no input;"
                    f" model inputs are {sorted(by_name)}",
                )
            _check(sig, array, item.file)
            arrays[name] = np.ascontiguousarray(array)
    return arrays


def _read(item: InputData) -> dict[str, npt.NDArray[np.generic]]:
    """The arrays in one file: never unpickled (object arrays are refused), an .npz's size bounded first."""
    try:
        if item.input is not None:
            return {item.input: np.load(io.BytesIO(item.data), allow_pickle=False)}
        with zipfile.ZipFile(io.BytesIO(item.data)) as archive:
            members = archive.infolist()
            inflated = sum(m.file_size for m in members)
        if len(members) > MAX_NPZ_MEMBERS or inflated > MAX_NPZ_BYTES:
            raise TaskFailed(
                FailureReason.INPUT,
                f"input data {item.file!r}: {len(members)} arrays, {inflated} bytes inflated;"
                f" at most {MAX_NPZ_MEMBERS} and {MAX_NPZ_BYTES}",
            )
        with np.load(io.BytesIO(item.data), allow_pickle=False) as npz:
            return {name: npz[name] for name in npz.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise TaskFailed(
            FailureReason.INPUT, f"input data {item.file!r} cannot be read safely: {exc}"
        ) from exc


def _check(sig: InputSig, array: npt.NDArray[np.generic], file: str) -> None:
    where = f"input {sig.name!r} from {file!r}"
    if array.dtype != np.dtype(sig.dtype):
        raise TaskFailed(FailureReason.INPUT, f"{where}: type {array.dtype}, the model wants {sig.dtype}")
    if sig.shape is None:
        return
    shape = tuple(int(d) for d in array.shape)
    want = [d if isinstance(d, int) and d >= 0 else "?" for d in sig.shape]
    fits = len(shape) == len(want) and all(w == "?" or w == g for w, g in zip(want, shape, strict=False))
    if not fits:
        raise TaskFailed(FailureReason.INPUT, f"{where}: shape {list(shape)}, the model wants {want}")


def _source_of(name: str, data: Sequence[InputData]) -> InputData | None:
    """The file that gave input `name`, if any (an .npy names its input; an .npz its arrays)."""
    for item in data:
        if item.input == name or (item.input is None and name in _npz_names(item)):
            return item
    return None


def _npz_names(item: InputData) -> list[str]:
    with zipfile.ZipFile(io.BytesIO(item.data)) as archive:
        return [n.removesuffix(".npy") for n in archive.namelist()]


def _from_file(name: str, array: npt.NDArray[np.generic], item: InputData) -> InputFed:
    return InputFed(
        name=name,
        dtype=str(array.dtype),
        shape=tuple(int(d) for d in array.shape),
        fill="file",
        file=item.file,
        file_sha256=item.sha256,
    )
