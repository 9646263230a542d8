"""`Retry-After` as the client reads it: a valid wait is honoured, anything else is as if absent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from drivers.endpoint.retrying import MAX_RETRY_AFTER_S, retry_after_s


def _date(seconds: float) -> str:
    return format_datetime(datetime.now(UTC) + timedelta(seconds=seconds), usegmt=True)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("3", 3.0), (" 7 ", 7.0), ("0", 0.0), (str(int(MAX_RETRY_AFTER_S)), MAX_RETRY_AFTER_S)],
)
def test_delay_seconds_are_honoured(value: str, seconds: float) -> None:
    assert retry_after_s(value) == seconds


@pytest.mark.parametrize(
    "value",
    [None, "", "-5", "-0.5", "1.5", "soon", "nan", "inf", "1e400", "٣", "99999999999999999999", "86401"],
    ids=["none", "empty", "negative", "negative-fraction", "fraction", "word", "nan", "inf", "overflow",
         "arabic-digit", "huge", "past-a-day"],
)  # fmt: skip
def test_an_invalid_value_is_absent(value: str | None) -> None:
    assert retry_after_s(value) is None


def test_an_http_date_is_a_wait_until_then_and_one_past_is_now() -> None:
    ahead = retry_after_s(_date(30))
    assert ahead is not None
    assert 25 <= ahead <= 30
    assert retry_after_s(_date(-30)) == 0.0
    assert retry_after_s(_date(10 * 86_400)) is None
