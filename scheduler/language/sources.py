"""The models a campaign file names: ``model``, ``models`` or the seeds' ``model_url``, validated."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final
from urllib.parse import unquote, urlsplit

from protocol import ModelFormat, Value
from scheduler.language.problems import Problems, check_keys, describe, join


class ModelSource(Value):
    """One model as the campaign file names it, before the submitter pins its bytes.

    Attributes:
        key: stable id within the campaign (given as ``key:`` or the file name without extension).
        url: http(s) URL to fetch from, or None.
        path: local path as written (relative to the campaign file), or None.
        sha256: the digest the file pins (lowercase), or None: the submitter computes and pins it.
        name: the model's file name.
        format: the model format (given, or from the file extension).
    """

    key: str
    url: str | None = None
    path: str | None = None
    sha256: str | None = None
    name: str
    format: ModelFormat = ModelFormat.ONNX


_MODEL_FIELDS: Final = ("key", "url", "path", "sha256", "format", "name")
_KEY_RE: Final = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_SHA256_RE: Final = re.compile(r"^[0-9a-fA-F]{64}$")
_BY_EXTENSION: Final[dict[str, ModelFormat]] = {
    ".onnx": ModelFormat.ONNX,
    ".pt2": ModelFormat.TORCH_EXPORT,
    ".mlmodel": ModelFormat.COREML,
    ".mlpackage": ModelFormat.COREML,
    ".gguf": ModelFormat.GGUF,
    ".safetensors": ModelFormat.SAFETENSORS,
    ".tflite": ModelFormat.TFLITE,
    ".pte": ModelFormat.PTE,
}
_PICKLES: Final = (".pkl", ".pickle", ".pth", ".pt", ".bin", ".joblib")
_FORMATS: Final = ", ".join(f.value for f in ModelFormat)


def parse_models(data: Mapping[str, object], problems: Problems) -> list[ModelSource]:
    """Read the campaign's models from whichever of ``model``, ``models``, ``model_url`` it has.

    Args:
        data: the campaign file's top-level mapping.
        problems: where every problem found is recorded.

    Returns:
        The valid models (the invalid ones are left out and their problems recorded).
    """
    given = [k for k in ("model", "models", "model_url") if k in data]
    if not given:
        problems.add("model", "required: model: {url: ...} or {path: ...}, or models: [...], or model_url")
        return []
    for extra in given[1:]:
        problems.add(
            extra, f"give only one of model, models and model_url (this file has {', '.join(given)})"
        )
    kind = given[0]
    raw = data[kind]
    if kind == "model_url":
        entries: list[tuple[str, object]] = [("model_url", raw)]
    elif kind == "model":
        entries = [("model", raw)]
    elif isinstance(raw, list) and raw:
        entries = [(f"models[{i}]", entry) for i, entry in enumerate(raw)]
    else:
        problems.add("models", f"expected a non-empty list of models, got {describe(raw)}")
        return []
    sources = [_source(path, entry, problems) for path, entry in entries]
    found = [s for s in sources if s is not None]
    _unique_keys([(path, s) for (path, _), s in zip(entries, sources, strict=True) if s], problems)
    return found


def _source(path: str, raw: object, problems: Problems) -> ModelSource | None:
    if path == "model_url":
        url = _url(raw, path, problems)
        name = _file_name(url, path, problems) if url else None
        if url is None or name is None:
            return None
        return ModelSource(
            key=_key_of(name), url=url, name=name, format=_format_of(None, name, path, problems)
        )
    if not isinstance(raw, dict):
        problems.add(path, f"expected a mapping with url or path, got {describe(raw)}")
        return None
    return _entry(path, raw, problems)


def _entry(path: str, raw: Mapping[str, object], problems: Problems) -> ModelSource | None:
    before = len(problems.items)
    check_keys(raw, path, _MODEL_FIELDS, problems)
    url = _url(raw["url"], join(path, "url"), problems) if "url" in raw else None
    local = raw.get("path")
    if "path" in raw and (not isinstance(local, str) or not local.strip()):
        problems.add(join(path, "path"), f"expected a file path, got {describe(local)}")
    if "url" in raw and "path" in raw:
        problems.add(path, "give url or path, not both")
    elif "url" not in raw and "path" not in raw:
        problems.add(path, "required: url or path")
    sha256 = _sha256(raw.get("sha256"), join(path, "sha256"), problems)
    where = url if url else local if isinstance(local, str) else None
    name = raw.get("name")
    if name is None:
        name = _file_name(where, path, problems) if where else None
    elif not isinstance(name, str) or not 1 <= len(name) <= 255 or "/" in name:
        problems.add(join(path, "name"), f"expected a file name of 1 to 255 characters, got {describe(name)}")
    key = raw.get("key")
    if key is not None and (not isinstance(key, str) or not _KEY_RE.match(key)):
        problems.add(
            join(path, "key"), f"expected letters, digits, '.', '_' or '-' (up to 64), got {describe(key)}"
        )
    if not isinstance(name, str) or len(problems.items) > before:
        return None
    model_format = _format_of(raw.get("format"), name, path, problems)
    if len(problems.items) > before:
        return None
    return ModelSource(
        key=key if isinstance(key, str) else _key_of(name),
        url=url,
        path=local if isinstance(local, str) else None,
        sha256=sha256,
        name=name,
        format=model_format,
    )


def _url(raw: object, path: str, problems: Problems) -> str | None:
    if not isinstance(raw, str):
        problems.add(path, f"expected an http(s) URL, got {describe(raw)}")
        return None
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        problems.add(path, f"expected an http(s) URL with a host, got {raw!r}")
        return None
    return raw


def _sha256(raw: object, path: str, problems: Problems) -> str | None:
    if raw is None:
        return None
    if isinstance(raw, str) and _SHA256_RE.match(raw):
        return raw.lower()
    size = f" ({len(raw)} characters)" if isinstance(raw, str) else ""
    problems.add(path, f"expected 64 hexadecimal digits (a sha256), got {describe(raw)}{size}")
    return None


def _file_name(where: str, path: str, problems: Problems) -> str | None:
    tail = unquote(urlsplit(where).path) if "://" in where else where
    name = re.split(r"[/\\]", tail.rstrip("/\\"))[-1]
    if not name or len(name) > 255:
        problems.add(path, f"cannot tell the model's file name from {where!r}; add name:")
        return None
    return name


def _format_of(raw: object, name: str, path: str, problems: Problems) -> ModelFormat:
    if raw is not None:
        if isinstance(raw, str) and raw in {f.value for f in ModelFormat}:
            return ModelFormat(raw)
        problems.add(join(path, "format"), f"expected one of {_FORMATS}, got {describe(raw)}")
        return ModelFormat.ONNX
    lower = name.lower()
    for extension, model_format in _BY_EXTENSION.items():
        if lower.endswith(extension):
            return model_format
    if lower.endswith(_PICKLES):
        problems.add(
            path, f"{name!r} looks like a pickle, which is refused; a TorchScript archive needs format:"
        )
    return ModelFormat.ONNX


def _key_of(name: str) -> str:
    stem = name.rsplit(".", 1)[0] if "." in name.strip(".") else name
    return re.sub(r"[^A-Za-z0-9._-]", "-", stem)[:64] or "model"


def _unique_keys(entries: list[tuple[str, ModelSource]], problems: Problems) -> None:
    seen: dict[str, str] = {}
    for path, source in entries:
        if source.key in seen:
            problems.add(
                join(path, "key"), f"{source.key!r} is also the key of {seen[source.key]}; give each a key:"
            )
        else:
            seen[source.key] = path
