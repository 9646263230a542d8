"""A hostile worker for tests: the real `sark-node join`, whose advert lists other services' addresses.

Run as `python tests/kit/decoy.py ADDRS_FILE join ...`. It is the node's own worker with its own key;
only the advert it signs is changed, in this process: the addresses in ADDRS_FILE (one a line) go
before its own, as many as the file holds (built without validation, as an attacker's own code would
build it), so every peer that reads the advert is pointed at them. Its provider records and its
host stay honest. Nothing in the product reads this file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import node.worker.advertising as advertising
from node.cli import main
from protocol import AdvertBody


def lying_advert(decoys: tuple[str, ...]) -> Any:
    def build(**fields: Any) -> AdvertBody:
        fields["addrs"] = (*decoys, *fields["addrs"])
        return AdvertBody.model_construct(**fields)  # no bound checked on this side

    return build


if __name__ == "__main__":
    listed = tuple(Path(sys.argv.pop(1)).read_text().split())
    advertising.AdvertBody = lying_advert(listed)  # type: ignore[attr-defined]
    main()
