"""Errors of the HTTP API: a request the API refuses, and a bind address it will not serve on.

A refusal carries `Problem`s: the field (or header) at fault, the rule it broke as a code, a message
for people and, where an option of `serve` would allow it, a hint that names that option.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from node.errors import NodeError


class Rule(StrEnum):
    """Which rule a refused request broke (what clients and tests branch on, never the message)."""

    HOST_NOT_ALLOWED = "host_not_allowed"
    ORIGIN_NOT_ALLOWED = "origin_not_allowed"
    MEDIA_TYPE = "media_type"
    BODY_TOO_LARGE = "body_too_large"
    NOT_UTF8 = "not_utf8"
    NOT_JSON = "not_json"
    INVALID = "invalid"
    LOCAL_PATH = "local_path"
    URL_REFUSED = "url_refused"
    MODEL_UNAVAILABLE = "model_unavailable"
    TOO_COSTLY = "too_costly"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a request.

    Attributes:
        path: the field as the user wrote it (``model_url``, ``jobs[0].compute_unit``), a header
            (``header:Origin``), or "" for the whole body.
        rule: the rule broken.
        message: what is wrong, in words a user can act on.
        hint: what would allow it (an option of `serve`, a header to send), or "".
    """

    path: str
    rule: Rule
    message: str
    hint: str = ""

    def to_json(self) -> dict[str, str]:
        """The problem as the API answers it."""
        return {"path": self.path, "rule": self.rule.value, "message": self.message, "hint": self.hint}


class ApiError(NodeError):
    """A request the API answers with a 4xx status.

    Attributes:
        status: the HTTP status code.
        problems: what is wrong, field by field (empty for a plain 404 or 405).
    """

    def __init__(self, status: int, detail: str, problems: Iterable[Problem] = ()) -> None:
        super().__init__(detail)
        self.status = status
        self.problems = tuple(problems)

    def to_json(self) -> dict[str, Any]:
        """The answer's body: ``{"error": detail, "problems": [...]}``."""
        return {"error": self.detail, "problems": [p.to_json() for p in self.problems]}


class NotFound(ApiError):
    """The worker, campaign, job or file named in the path does not exist here."""

    def __init__(self, what: str, name: str) -> None:
        super().__init__(404, f"no {what} {name!r}")
        self.what = what
        self.name = name


class BadRequest(ApiError):
    """The request body or a parameter is invalid: 400 with at least one problem."""

    def __init__(self, detail: str, problems: Iterable[Problem]) -> None:
        super().__init__(400, detail, problems)
        assert self.problems, "a 400 names what is wrong"


class Refused(ApiError):
    """A request refused before any handler runs: foreign Host (421), foreign Origin (403),
    unsupported media type (415) or an oversized body (413)."""

    def __init__(self, status: int, problem: Problem) -> None:
        super().__init__(status, problem.message, (problem,))


class UnsafeBind(NodeError):
    """A bind address outside loopback was asked for without a token (the API would be open)."""

    def __init__(self, host: str) -> None:
        super().__init__(f"--http {host} is not a loopback address: give --token to serve on it")
        self.host = host
