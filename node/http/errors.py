"""Errors of the HTTP API: a request the API refuses, and a bind address it will not serve on."""

from __future__ import annotations

from node.errors import NodeError


class ApiError(NodeError):
    """A request the API answers with a 4xx status.

    Attributes:
        status: the HTTP status code.
        problems: field-by-field problems, if the request body was invalid.
    """

    def __init__(self, status: int, detail: str, problems: tuple[str, ...] = ()) -> None:
        super().__init__(detail)
        self.status = status
        self.problems = problems


class NotFound(ApiError):
    """The worker, campaign, job or file named in the path does not exist here."""

    def __init__(self, what: str, name: str) -> None:
        super().__init__(404, f"no {what} {name!r}")
        self.what = what
        self.name = name


class BadRequest(ApiError):
    """The request body or a parameter is invalid."""

    def __init__(self, detail: str, problems: tuple[str, ...] = ()) -> None:
        super().__init__(400, detail, problems)


class UnsafeBind(NodeError):
    """A bind address outside loopback was asked for without a token (the API would be open)."""

    def __init__(self, host: str) -> None:
        super().__init__(f"--http {host} is not a loopback address: give --token to serve on it")
        self.host = host
