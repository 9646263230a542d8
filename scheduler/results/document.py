"""results.json as one typed value: `CampaignReport`, what every medium renders.

A campaign's report is built once, on the submitter from each task's typed value (`TaskResult`) and
its row, or read once from a results.json file (`CampaignReport.from_json`); results.json is its
`to_json`. Every renderer (report.html, Markdown, the terminal tables, `report --diff`, the REST API
and the dashboard) takes this value or one of its typed parts, so no renderer validates a document
again and none reads a file back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import Field, ValidationError

from protocol import DeviceProfile, Measurement, ResultBody, Stats, Value, field_problems
from scheduler.errors import FieldProblem, SchedulerError
from scheduler.language import Campaign
from scheduler.results.columns import CSV_COLUMNS, column_formulas
from scheduler.results.front import Front, groups_of
from scheduler.results.frontrank import Ranking, ranking_of
from scheduler.results.prices import Price
from scheduler.results.typed import TaskResult
from scheduler.results.verifygroups import GroupVerification, verification_groups


class ResultsFileError(SchedulerError):
    """A results.json that cannot be read as a campaign report: every problem, each naming its field.

    Attributes:
        source: the file the text came from.
        problems: what was wrong, field by field ("" for the whole file).
    """

    def __init__(self, problems: Iterable[FieldProblem], *, source: str = "results.json") -> None:
        self.source = source
        self.problems = tuple(problems)
        lines = [f"{source}: not a results.json this version can read"]
        lines.extend(f"  {p}" for p in self.problems)
        super().__init__("\n".join(lines))


class Signed(Value):
    """What the worker signed, as the report shows it: the worker, its device and the measurement the
    submitter derived from the worker's raw parts (results.json keeps its samples once, beside it)."""

    worker: str
    device: DeviceProfile
    measurement: Measurement


class Merged(Value):
    """A fleet job's merged figures: the end-to-end latency of every member's records together."""

    e2e_ms: Stats


class ReportTask(Value):
    """One task of the report: its row, its raw inference samples (ms), and its typed parts.

    Attributes:
        row: the task's row, every cell rendered by the registry (results.csv's line).
        samples_ms: the raw inference samples.
        signed: the signed parts of a measured task (None: it ended without one, or the file predates them).
        merged: a fleet job's merged row's figures.
        price: the price its results are costed at, with its source (`scheduler.results.prices`).
    """

    row: dict[str, str]
    samples_ms: tuple[float, ...] = ()
    signed: Signed | None = None
    merged: Merged | None = None
    price: Price | None = None

    @classmethod
    def of(cls, row: Mapping[str, str], result: TaskResult | None) -> ReportTask:
        """A task's part from its row and the typed value the row was rendered from (None: a capacity
        search's level row)."""
        if result is None:
            return cls(row=dict(row))
        body = result.body
        signed = (
            None if body is None else Signed(worker=body.worker, device=body.device, measurement=_shown(body))
        )
        merged = None if result.merged is None else Merged(e2e_ms=result.merged.e2e_ms)
        return cls(
            row=dict(row), samples_ms=result.samples_ms, signed=signed, merged=merged, price=result.price
        )

    @property
    def measurement(self) -> Measurement | None:
        """The derived measurement, if the task has one."""
        return self.signed.measurement if self.signed is not None else None

    def document(self) -> dict[str, Any]:
        """This task's entry of results.json (`merged` only for a fleet's merged row, `price` only for a
        priced one)."""
        signed = self.signed
        entry: dict[str, Any] = {"row": dict(self.row), "samples_ms": list(self.samples_ms)}
        entry["signed"] = None if signed is None else {
            "worker": signed.worker,
            "device": signed.device.model_dump(mode="json"),
            "measurement": signed.measurement.model_dump(mode="json", exclude={"samples_ms"}),
        }  # fmt: skip
        if self.merged is not None:
            entry["merged"] = {"e2e_ms": self.merged.e2e_ms.model_dump(mode="json")}
        if self.price is not None:
            entry["price"] = self.price.model_dump(mode="json")
        return entry


def _shown(body: ResultBody) -> Measurement:
    """The measurement as the report keeps it: its samples once, beside it (as results.json has them)."""
    return body.measurement.with_(samples_ms=())


class CampaignReport(Value):
    """What a campaign produced, typed: results.json's schema.

    Attributes:
        campaign_id: the campaign's id.
        campaign: the campaign as it ran.
        columns: results.csv's header (`CSV_COLUMNS` when it was written).
        formulas: each computed generation column's formula.
        results: every task, in task order; a capacity search's level rows after its row, a fleet's
            merged rows last.
        swarm: the gates the campaign last ran through, or ("embedded",) for the embedded local
            swarm; () when not known (a campaign stored before this was recorded).
        verification: each replica group's verification (`verifygroups`): the agreed figure, the
            band, the replicas' figures and networks, the outliers; () when no job asked `verify:`.
        fronts: each device's or server's throughput-latency front over its load levels, at each
            swept length (`scheduler.results.front`); () when no group has two points.
        ranking: the campaign's `rank:` applied to every device's or server's points at each length
            (`scheduler.results.frontrank`); None when the campaign asks none.
    """

    campaign_id: str
    campaign: Campaign
    columns: tuple[str, ...] = ()
    formulas: dict[str, str] = Field(default_factory=dict)
    results: tuple[ReportTask, ...] = ()
    swarm: tuple[str, ...] = ()
    verification: tuple[GroupVerification, ...] = ()
    fronts: tuple[Front, ...] = ()
    ranking: Ranking | None = None

    @classmethod
    def of(
        cls,
        campaign_id: str,
        campaign: Campaign,
        rows: Iterable[tuple[Mapping[str, str], TaskResult | None]],
        swarm: tuple[str, ...] = (),
    ) -> CampaignReport:
        """The report built once from each row and the typed value it was rendered from; the
        verification of each replica group from the rows' tasks."""
        rows = list(rows)
        tasks = (result.task for _, result in rows if result is not None)
        results = tuple(ReportTask.of(row, result) for row, result in rows)
        groups = groups_of(campaign, ((t.row, t.measurement) for t in results))
        return cls(
            campaign_id=campaign_id,
            campaign=campaign,
            columns=CSV_COLUMNS,
            formulas=column_formulas(),
            results=results,
            swarm=swarm,
            verification=verification_groups(tasks),
            fronts=tuple(front for front in groups if len(front.points) > 1),
            ranking=ranking_of(campaign.rank, groups),
        )

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "results.json") -> CampaignReport:
        """The report a results.json holds (one written before the signed parts has tasks without
        figures); Python's `NaN` and `Infinity` are read as results.json writes them.

        Raises:
            ResultsFileError: the text is no JSON object, or a field does not fit; each problem named.
        """
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            raise ResultsFileError([FieldProblem("", f"not JSON: {exc}")], source=source) from exc
        if not isinstance(data, dict):
            raise ResultsFileError([FieldProblem("", "not a JSON object")], source=source)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            lines = (line.partition(": ") for line in field_problems(exc))
            problems = [FieldProblem(path, problem) for path, _, problem in lines]
            raise ResultsFileError(problems, source=source) from exc

    def document(self) -> dict[str, Any]:
        """results.json as plain JSON values, in its keys' order (`verification` only where asked)."""
        return {
            "campaign_id": self.campaign_id,
            "campaign": self.campaign.model_dump(mode="json"),
            "columns": list(self.columns),
            "formulas": dict(self.formulas),
            "results": [task.document() for task in self.results],
            "swarm": list(self.swarm),
            **(
                {"verification": [g.model_dump(mode="json") for g in self.verification]}
                if self.verification
                else {}
            ),
            **({"fronts": [f.model_dump(mode="json") for f in self.fronts]} if self.fronts else {}),
            **({"ranking": self.ranking.model_dump(mode="json")} if self.ranking is not None else {}),
        }

    def to_json(self) -> str:
        """results.json's text (one-space indents; NaN and infinities as Python writes them)."""
        return json.dumps(self.document(), indent=1)
