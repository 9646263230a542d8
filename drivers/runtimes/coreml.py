"""coremltools driver: `GPU (CoreML)` and `Neural Engine (CoreML)`, macOS only.

coremltools installs on Linux but has no native predict bridge there (`MLModel.predict` raises a bare
Exception), so off macOS both units are unavailable with that reason before any predict is tried.
Core ML compute units are a request, not a guarantee: Core ML may still place layers on the CPU.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import logging
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from drivers.errors import TaskFailed
from drivers.files.inputs import InputSig
from drivers.runtimes.driver import Feeds, LoadOptions, Placement, Settings
from drivers.runtimes.missing import not_installed
from protocol import ComputeUnit, FailureReason, ModelFormat, UnitStatus

# Compute unit -> `coremltools.ComputeUnit` member name.
COMPUTE_UNITS: Final = {ComputeUnit.GPU_COREML: "CPU_AND_GPU", ComputeUnit.NE_COREML: "CPU_AND_NE"}
# Core ML `ArrayFeatureType.ArrayDataType` values -> numpy dtype names.
ARRAY_DTYPES: Final = {65552: "float16", 65568: "float32", 65600: "float64", 131104: "int32"}


def unavailable_reason(platform: str, installed: bool, version: str = "") -> str:
    """Why Core ML cannot run on `platform`, or "" when it might (macOS with coremltools)."""
    if platform != "darwin":
        if installed:
            return f"Core ML needs macOS (this is {platform}); coremltools {version} can convert, not predict"
        return f"Core ML needs macOS (this is {platform})"
    if not installed:
        return not_installed(["coremltools"], "coreml", "Core ML units")
    return ""


def _installed_version() -> str:
    try:
        return importlib.metadata.version("coremltools")
    except importlib.metadata.PackageNotFoundError:
        return ""


def _ct() -> Any:
    logging.getLogger("coremltools").setLevel(logging.ERROR)
    import coremltools

    return coremltools


class CoremlDriver:
    """coremltools `MLModel` with the compute units of one Core ML unit."""

    formats: frozenset[ModelFormat] = frozenset({ModelFormat.COREML})

    def __init__(self, unit: ComputeUnit) -> None:
        self.unit = unit
        self.compute_units = COMPUTE_UNITS[unit]

    def probe(self) -> UnitStatus:
        """Predict with a one-op ML program on these compute units (macOS only)."""
        installed = importlib.util.find_spec("coremltools") is not None
        reason = unavailable_reason(sys.platform, installed, _installed_version())
        if reason:
            return UnitStatus(unit=self.unit, usable=False, reason=reason)
        ct = _ct()
        if ct.models.model._MLModelProxy is None:
            return UnitStatus(
                unit=self.unit, usable=False, reason="coremltools native predict bridge missing"
            )
        try:
            self._probe_predict(ct)
        except Exception as exc:  # the runtime's error is the reason
            return UnitStatus(unit=self.unit, usable=False, reason=f"{type(exc).__name__}: {exc}")
        return UnitStatus(unit=self.unit, usable=True, provider=self.compute_units)

    def _probe_predict(self, ct: Any) -> None:
        import numpy as np
        from coremltools.converters.mil import Builder as mb

        @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4))])  # type: ignore[untyped-decorator]
        def relu(x: Any) -> Any:
            return mb.relu(x=x)

        with tempfile.TemporaryDirectory() as tmp:
            model = ct.convert(relu, convert_to="mlprogram", compute_units=ct.ComputeUnit[self.compute_units])
            model.save(str(Path(tmp) / "probe.mlpackage"))
            model.predict({"x": np.ones((1, 4), dtype=np.float32)})

    def prepare(self) -> None:
        """Import coremltools."""
        _ct()

    def versions(self) -> dict[str, str]:
        """The coremltools version."""
        return {"coremltools": _installed_version()}

    def load(self, path: Path, options: LoadOptions) -> CoremlLoaded:
        """Open an .mlpackage / .mlmodel with this unit's compute units."""
        status = self.probe()
        if not status.usable:
            raise TaskFailed(FailureReason.UNIT_UNAVAILABLE, f"unit unavailable: {status.reason}")
        ct = _ct()
        try:
            model = ct.models.MLModel(str(path), compute_units=ct.ComputeUnit[self.compute_units])
        except Exception as exc:  # translate the runtime's error at the seam
            raise TaskFailed(FailureReason.LOAD, f"coremltools could not load the model: {exc}") from exc
        return CoremlLoaded(model, self.compute_units)


class CoremlLoaded:
    """A Core ML model ready to predict."""

    def __init__(self, model: Any, compute_units: str) -> None:
        self.model, self.compute_units = model, compute_units

    def inputs(self) -> list[InputSig]:
        """Multi-array inputs from the model description."""
        sigs = []
        for feature in self.model.get_spec().description.input:
            array = feature.type.multiArrayType
            dtype = ARRAY_DTYPES.get(int(array.dataType))
            if dtype is None:
                raise TaskFailed(
                    FailureReason.INPUT, f"input {feature.name!r}: only multi-array inputs are supported"
                )
            sigs.append(InputSig(feature.name, dtype, tuple(int(d) for d in array.shape)))
        return sigs

    def runner(self, feeds: Feeds) -> Callable[[], object]:
        """`model.predict(feeds)`."""
        return functools.partial(self.model.predict, dict(feeds))

    def placement(self) -> Placement:
        """The compute units requested; Core ML does not report per-layer placement here."""
        return Placement((self.compute_units,))

    def settings(self) -> Settings:
        """Core ML exposes no thread settings."""
        return Settings()
