"""The four campaigns report.html is looked at with (tests/labs/views/test_report_screens.py) and
that the report's own tests read: a tensor, an LLM, a model-server (endpoint) and a verified campaign,
each built by the real scheduler (the golden campaigns) or read from a real run's results.json."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

import scheduler as sch
from kit.golden_campaigns import CAMPAIGNS, CREATED
from node.submitter.outputs import campaign_report
from scheduler.results import CampaignReport

LLM_RESULTS: Final = Path(__file__).resolve().parents[1] / "golden" / "reports" / "llm_results.json"
"""`sark-node submit examples/llm.yaml`, as run."""


def _verified() -> CampaignReport:
    """A replicated campaign played by the scheduler: four peers on four networks, one halving liar
    settled as the outlier of a third replica, the others `replicated 2/2` and `2/3`."""
    return _verified_played()[1]


def _verified_played() -> tuple[sch.Scheduler, CampaignReport]:
    """`_verified`'s campaign (the golden `verified`): the scheduler that played it, and its report."""
    golden = CAMPAIGNS["verified"]()
    return golden.scheduler, campaign_report(
        golden.scheduler, golden.results, CREATED, golden.campaign_id, golden.campaign
    )


def _golden(name: str) -> Callable[[], CampaignReport]:
    def build() -> CampaignReport:
        golden = CAMPAIGNS[name]()
        return campaign_report(golden.scheduler, golden.results, CREATED, golden.campaign_id, golden.campaign)

    return build


REPORTS: Final[dict[str, Callable[[], CampaignReport]]] = {
    "tensor": _golden("tensor"),  # priced by the campaign and by an owner, a failure, an unschedulable unit
    "llm": lambda: CampaignReport.from_json(LLM_RESULTS.read_text()),  # examples/llm.yaml, for real
    "endpoint": _golden("generate"),  # a model server at two request rates, priced
    "verified": _verified,
}
