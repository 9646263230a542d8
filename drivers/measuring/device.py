"""What this device is: CPU, cores, RAM, OS, discrete GPUs, runtime versions, a stable fingerprint.

GPUs come from NVML (`pynvml` of nvidia-ml-py), else torch, else `nvidia-smi`; each missing source
adds to a reason instead of failing. Runtime versions come from package metadata, so no runtime is
imported just to name its version.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Final

import psutil

from drivers.runtimes.missing import FROZEN
from protocol import GpuInfo
from protocol.text import visible

MIB: Final = 1 << 20
RUNTIME_DISTS: Final = {
    "onnxruntime": ("onnxruntime", "onnxruntime-gpu", "onnxruntime-directml", "onnxruntime-migraphx"),
    "torch": ("torch",),
    "coremltools": ("coremltools",),
    "openvino": ("openvino",),
    "ai-edge-litert": ("ai-edge-litert",),
    "executorch": ("executorch",),
    "llama.cpp": ("xllamacpp",),
    "numpy": ("numpy",),
    "nvidia-ml-py": ("nvidia-ml-py",),
}


def cpu_model() -> str:
    """The CPU or SoC model name."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Hardware")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        out = _command(["sysctl", "-n", "machdep.cpu.brand_string"])
        if out:
            return out.strip()
    return platform.processor() or platform.machine()


def device_name() -> str:
    """The machine's product name where firmware gives one, else its host name."""
    try:
        name = Path("/sys/class/dmi/id/product_name").read_text().strip()
    except OSError:
        name = ""
    return visible(name or platform.node() or "unknown")[:128]  # a profile's name: printable, bounded


def os_version() -> str:
    """The OS release: distribution name and version on Linux, product version on macOS."""
    if platform.system() == "Darwin":
        return platform.mac_ver()[0]
    try:
        release = dict(
            line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line
        )
        return f"{release.get('PRETTY_NAME', '').strip(chr(34))} (kernel {platform.release()})"
    except OSError:
        return platform.release()


def runtime_versions() -> dict[str, str]:
    """Installed versions of the runtimes and meters, keyed by role; absent ones are left out."""
    versions: dict[str, str] = {"python": platform.python_version()}
    for role, dists in RUNTIME_DISTS.items():
        for dist in dists:
            try:
                versions[role] = importlib.metadata.version(dist)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return versions


def harness_versions() -> dict[str, str]:
    """The versions a measurement records beside its runtime's own (`Driver.versions`): Python and
    numpy, which the harness itself runs on. The other runtimes installed did not run it: the
    profile lists them (`runtime_versions`), a row names the one that ran."""
    every = runtime_versions()
    return {k: every[k] for k in ("python", "numpy") if k in every}


def fingerprint(soc: str, cores: int, ram_mb: int, gpus: tuple[GpuInfo, ...]) -> str:
    """A stable id of this hardware and OS install: sha256 of machine id, CPU, cores, RAM (GiB) and GPUs."""
    machine_id = ""
    for candidate in (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id")):
        try:
            machine_id = candidate.read_text().strip()
            break
        except OSError:
            continue
    parts = [
        machine_id or platform.node(),
        platform.system(),
        platform.machine(),
        soc,
        str(cores),
        str(ram_mb // 1024),
    ]
    parts += [g.name for g in gpus]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


def detect_gpus() -> tuple[tuple[GpuInfo, ...], str]:
    """Discrete GPUs and, when none is found, why (one clause per source tried)."""
    reasons: list[str] = []
    for source in (_nvml_gpus, _torch_gpus, _smi_gpus):
        gpus, reason = source()
        if gpus:
            return gpus, ""
        reasons.append(reason)
    return (), "; ".join(reasons)


def _nvml_gpus() -> tuple[tuple[GpuInfo, ...], str]:
    try:
        import pynvml
    except ImportError:
        return (), "NVML: nvidia-ml-py not installed"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return (), f"NVML: {type(exc).__name__} ({exc})"
    try:
        driver = str(pynvml.nvmlSystemGetDriverVersion())
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            total = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
            gpus.append(
                GpuInfo(
                    name=str(pynvml.nvmlDeviceGetName(handle)),
                    vram_mb=total // MIB,
                    driver=driver,
                    source="nvml",
                )
            )
        return tuple(gpus), "NVML: no device"
    finally:
        pynvml.nvmlShutdown()


def _torch_gpus() -> tuple[tuple[GpuInfo, ...], str]:
    if importlib.util.find_spec("torch") is None:
        return (), "torch: not in this build" if FROZEN else "torch: not installed"
    import torch

    if not torch.cuda.is_available():
        return (), f"torch {torch.__version__}: no CUDA device"
    gpus = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        gpus.append(GpuInfo(name=str(props.name), vram_mb=int(props.total_memory) // MIB, source="torch"))
    return tuple(gpus), ""


def _smi_gpus() -> tuple[tuple[GpuInfo, ...], str]:
    if shutil.which("nvidia-smi") is None:
        return (), "nvidia-smi: not found"
    out = _command(
        ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"]
    )
    if not out:
        return (), "nvidia-smi: no answer"
    return parse_smi(out), "nvidia-smi: no device"


def parse_smi(out: str) -> tuple[GpuInfo, ...]:
    """GPUs from `nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader,nounits`."""
    gpus = []
    for line in out.strip().splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 3 and fields[1].isdigit():
            gpus.append(
                GpuInfo(name=fields[0], vram_mb=int(fields[1]), driver=fields[2], source="nvidia-smi")
            )
    return tuple(gpus)


def _command(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def memory_mb() -> int:
    """Total RAM in MiB."""
    return int(psutil.virtual_memory().total // MIB)
