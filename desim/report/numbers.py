"""Numbers as a scientist prints them: an estimate to the digits its uncertainty supports.

A mean with a 95 % interval of half-width 0.0123 is printed to three decimals (two significant digits
of the half-width), so ``-0.000800925 [-0.0132, 0.0116]`` reads ``-0.001 [-0.013, 0.012]``. The full
precision stays in the store, the exports and ``effect_table``; only what is printed is rounded.
"""
from __future__ import annotations

import math

SIGNIFICANT = 2         # significant digits of the uncertainty
PLAIN = 4               # significant digits of a value with no uncertainty to go by


def decimals(uncertainty: float | None) -> int | None:
    """Decimals that show ``uncertainty`` (a half-width or an sd) to two significant digits; None when
    there is none to go by (one replicate, or all replicates equal)."""
    if uncertainty is None or not math.isfinite(uncertainty) or uncertainty <= 0:
        return None
    return min(12, max(0, SIGNIFICANT - 1 - math.floor(math.log10(uncertainty))))


def show(value: float | None, places: int | None) -> str:
    """``value`` to ``places`` decimals (``None``: four significant digits); "" for no value."""
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if places is None:
        return f"{value:.{PLAIN}g}"
    text = f"{value:.{places}f}"
    return "0" + text[2:] if text.startswith("-0") and float(text) == 0 else text     # no "-0.000"


def estimate_cells(mean: float | None, sd: float | None, low: float | None, high: float | None) -> list[str]:
    """The printed mean, sd, low and high of one summary row, all to the digits the interval supports."""
    half = (high - low) / 2 if low is not None and high is not None else sd
    places = decimals(half)
    sd_places = decimals(sd)
    return [show(mean, places), show(sd, sd_places), show(low, places), show(high, places)]
