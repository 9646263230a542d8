"""The cells of the telemetry and sustained-run columns.

`Throttled` is "" for a run that was not sustained, else whether a window's median drifted more than
`protocol.windows.DRIFT_PCT` from the first window's; `ThrottleCauses` are the causes' codes
(`protocol.ThrottleCause`: clock_drop, thermal, power_limit, hardware_slowdown, background_load,
unexplained) and `ThrottleDetail` says which window, how far and what telemetry showed.
`WindowMediansMs` lists every window's median. `TelemetryPeriodMs` and `TelemetryPoints` say what
series results.json keeps (the signed measurement's `telemetry`).
"""

from __future__ import annotations

from protocol import Measurement
from scheduler.results.columns import SUSTAIN_COLUMNS, cell, cells


def sustain_columns(m: Measurement) -> dict[str, str]:
    """The telemetry and sustained-run columns of one measurement ("" where they do not apply)."""
    columns = dict.fromkeys(SUSTAIN_COLUMNS, "")
    if m.telemetry is not None:
        columns["TelemetryPeriodMs"] = cell("TelemetryPeriodMs", m.telemetry.period_ms)
        columns["TelemetryPoints"] = cell("TelemetryPoints", len(m.telemetry.points))
    sustained = m.sustained
    if sustained is not None:
        columns["Throttled"] = cell("Throttled", sustained.throttled)
        columns["ThrottleCauses"] = cells("ThrottleCauses", (c.value for c in sustained.causes))
        columns["ThrottleDetail"] = sustained.detail
        columns["WindowMediansMs"] = cells("WindowMediansMs", (w.median_ms for w in sustained.windows))
    return columns
