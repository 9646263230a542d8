"""schemathesis against the schema `serve` publishes at /api/openapi.json: no 5xx, answers match it.

Bounded: a few examples per operation. Model URLs it generates are refused by the URL policy or fail
on loopback; nothing leaves the machine. Run alone: `pytest tests/unit/node/http/test_schema.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import APIOperation
from schemathesis.checks import positive_data_acceptance

from labs.views.test_http_api import start_serve

EXAMPLES: Final = 10


def test_api_matches_its_schema_and_never_fails(tmp_path: Path) -> None:
    served = start_serve(tmp_path)
    try:
        served.wait_event("peers", 60, count=1)
        schema = schemathesis.openapi.from_url(f"{served.api}/openapi.json")
        schema.config.base_url = served.api
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) == 19
        for operation in operations:
            _check(operation)
    finally:
        served.stop()


def _check(operation: APIOperation) -> None:
    @given(case=operation.as_strategy())
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case: schemathesis.Case) -> None:
        # A schema-valid body may still name a model URL that cannot be fetched (400): by design.
        case.call_and_validate(excluded_checks=[positive_data_acceptance])

    run()
