"""Simulated time: one step is one ``time_unit``; durations convert to steps.

The SimPy clock counts steps (sim time ``t`` is step ``t``). A study process
that lives at a finer grain, a canteen queue or a news cycle, says "45
minutes" and the clock turns that into a fraction of the step's unit, so the
same process works whether the study's step is a day or a month.
"""
from __future__ import annotations

SECONDS = {
    "second": 1.0,
    "minute": 60.0,
    "hour": 3600.0,
    "day": 86400.0,
    "week": 7 * 86400.0,
    "month": 30 * 86400.0,      # a modelling month: 30 days
    "quarter": 91 * 86400.0,
    "year": 365 * 86400.0,
}


class Clock:
    """Duration helpers for a study whose step lasts one ``time_unit``."""

    def __init__(self, time_unit: str):
        self.time_unit = time_unit

    def duration(self, amount: float, unit: str) -> float:
        """``amount`` of ``unit`` expressed in steps (the SimPy clock's unit)."""
        if unit == self.time_unit or unit == "step":
            return float(amount)
        if self.time_unit == "step":
            raise ValueError("this study's time_unit is 'step': durations in "
                             f"'{unit}' have no meaning; set time_unit in simulation.json")
        if unit not in SECONDS:
            raise ValueError(f"unknown unit '{unit}' (known: {sorted(SECONDS)})")
        return amount * SECONDS[unit] / SECONDS[self.time_unit]

    def minutes(self, n: float) -> float:
        return self.duration(n, "minute")

    def hours(self, n: float) -> float:
        return self.duration(n, "hour")

    def days(self, n: float) -> float:
        return self.duration(n, "day")

    def weeks(self, n: float) -> float:
        return self.duration(n, "week")
