"""`sark-node status`, `cancel`, `results`: the campaigns in this node's store, no network."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from node.cli.options import ConfigOpt, DataDirOpt, JsonOpt, build_config, fail

if TYPE_CHECKING:
    from pathlib import Path

    import scheduler as sch
    from node.submitter.store import CampaignStore


IdArg = Annotated[str, typer.Argument(help="campaign id (from submit or status)")]


def _stored(data_dir: Path | None, config_file: Path | None) -> CampaignStore:
    from node.submitter.store import CampaignStore

    return CampaignStore(build_config(config_file, data_dir=data_dir).data.campaigns)


def _restored(record: Any) -> sch.Scheduler | None:
    from node.submitter.run import restore

    return None if record.snapshot is None else restore(record).scheduler


def status(
    campaign_id: Annotated[str | None, typer.Argument(help="a campaign id; all campaigns if omitted")] = None,
    data_dir: DataDirOpt = None,
    config_file: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A campaign's tasks as the store last saw them, or every stored campaign."""
    from rich import box
    from rich.table import Table

    from node.cli.console import console, id_tail
    from protocol import for_rich

    store = _stored(data_dir, config_file)
    if campaign_id is None:
        records = store.campaigns()
        rows = [
            {
                "campaign_id": r.campaign_id,
                "name": r.name,
                "created": r.created_utc,
                "status": r.shown_status(),
                "results": len(store.results(r.campaign_id)),
            }
            for r in records
        ]
        if as_json:
            print(json.dumps({"campaigns": rows}))
            return
        console().print(_campaigns_table(rows))
        return
    record = store.campaign(campaign_id)
    if record is None:
        fail(f"error: no campaign {campaign_id} in this node's store", 2)
    scheduler = _restored(record)
    tasks = list(scheduler.tasks()) if scheduler is not None else []
    if as_json:
        print(
            json.dumps(
                {
                    "campaign_id": campaign_id,
                    "status": record.shown_status(),
                    "tasks": [t.model_dump(mode="json") for t in tasks],
                }
            )
        )
        return
    table = Table(title=for_rich(f"{campaign_id} ({record.shown_status()})"), box=box.SIMPLE_HEAD)
    for name in ("task", "unit", "device", "worker", "state", "detail"):
        table.add_column(name, no_wrap=name in ("task", "worker"), overflow="fold")
    for t in tasks:  # the title names the campaign: a task is its job and number (as in submit's view)
        worker = id_tail(t.peer_id) if t.peer_id else ""
        cells = (t.task_id.rsplit("-job-", 1)[-1], t.shown_unit, t.device_name or "", worker, t.state.value)
        table.add_row(*(for_rich(c) for c in (*cells, t.detail)))
    console().print(table)


def _campaigns_table(rows: list[dict[str, Any]]) -> Any:
    """Every stored campaign, one a line. It reads at 80 columns: ids whole (they differ only in their
    tail), the creation time to the minute, the name last and folded if long."""
    from rich import box
    from rich.table import Table

    from protocol import for_rich

    table = Table(box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False)
    for name in ("campaign", "created (UTC)", "status", "results", "name"):
        table.add_column(name, no_wrap=name != "name", overflow="fold")
    for row in rows:
        created = str(row["created"]).replace("T", " ")[:16]
        cells = (row["campaign_id"], created, row["status"], row["results"], row["name"])
        table.add_row(*(for_rich(str(v)) for v in cells))
    return table


def cancel(campaign_id: IdArg, data_dir: DataDirOpt = None, config_file: ConfigOpt = None) -> None:
    """Cancel a campaign: its submitter (running now, or on --resume) cancels every task on its worker."""
    from node.submitter.store import utc_now

    store = _stored(data_dir, config_file)
    if store.campaign(campaign_id) is None:
        fail(f"error: no campaign {campaign_id} in this node's store", 2)
    store.request_cancel(campaign_id, utc_now())
    print(f"cancel requested for {campaign_id}")


def results(
    campaign_id: IdArg,
    data_dir: DataDirOpt = None,
    config_file: ConfigOpt = None,
) -> None:
    """Print a campaign's results.csv (every task, rebuilt from the store) on stdout."""
    from node.submitter.outputs import campaign_rows
    from node.submitter.run import restore
    from node.submitter.store import utc_now
    from scheduler import to_csv

    store = _stored(data_dir, config_file)
    record = store.campaign(campaign_id)
    if record is None:
        fail(f"error: no campaign {campaign_id} in this node's store", 2)
    scheduler = _restored(record)
    if scheduler is None:
        fail(f"error: campaign {campaign_id} never got as far as discovery", 1)
    rows = campaign_rows(scheduler, store.results(campaign_id), utc_now(), restore(record).campaign)
    sys.stdout.write(to_csv(row for row, _ in rows))


def register(app: typer.Typer) -> None:
    """Add `status`, `cancel` and `results` to the CLI."""
    app.command()(status)
    app.command()(cancel)
    app.command()(results)
