"""The result columns of live telemetry and sustained runs, after the generate ones.

`Throttled` is "" for a run that was not sustained, else whether a window's median drifted more than
`protocol.windows.DRIFT_PCT` from the first window's; `ThrottleCauses` are the causes' codes
(`protocol.ThrottleCause`: clock_drop, thermal, power_limit, hardware_slowdown, background_load,
unexplained) and `ThrottleDetail` says which window, how far and what telemetry showed.
`WindowMediansMs` lists every window's median. `TelemetryPeriodMs` and `TelemetryPoints` say what
series results.json keeps (the signed measurement's `telemetry`).
"""

from __future__ import annotations

from typing import Final

from protocol import Measurement

SUSTAIN_COLUMNS: Final = (
    "Throttled",
    "ThrottleCauses",
    "ThrottleDetail",
    "WindowMediansMs",
    "TelemetryPeriodMs",
    "TelemetryPoints",
)


def sustain_columns(m: Measurement) -> dict[str, str]:
    """The telemetry and sustained-run columns of one measurement ("" where they do not apply)."""
    columns = dict.fromkeys(SUSTAIN_COLUMNS, "")
    if m.telemetry is not None:
        columns["TelemetryPeriodMs"] = f"{m.telemetry.period_ms:g}"
        columns["TelemetryPoints"] = str(len(m.telemetry.points))
    sustained = m.sustained
    if sustained is not None:
        columns["Throttled"] = "True" if sustained.throttled else "False"
        columns["ThrottleCauses"] = ";".join(c.value for c in sustained.causes)
        columns["ThrottleDetail"] = sustained.detail
        columns["WindowMediansMs"] = ";".join(
            "" if w.median_ms is None else f"{w.median_ms:.3f}" for w in sustained.windows
        )
    return columns
