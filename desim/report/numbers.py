"""Numbers as a scientist prints them: an estimate to the digits its uncertainty supports.

A mean with a 95 % interval of half-width 0.0123 is printed to three decimals (two significant digits
of the half-width), so ``-0.000800925 [-0.0132, 0.0116]`` reads ``-0.001 [-0.013, 0.012]``. The full
precision stays in the store, the exports and ``effect_table``; only what is printed is rounded.

A value with no uncertainty to go by (one replicate, or every replicate the same: sd 0) is exact as far as
the runs can tell, so it is printed to six significant digits (:data:`PLAIN`) without an exponent, its
integer part never cut: ``12345`` and ``1.00009``, not ``1.234e+04`` (read as 12340) and ``1``.

An interval end clipped at the quantity's bounds (``describe``'s ``ci_low_clipped``, ``ci_high_clipped``) is
printed with a dagger after it, and the table says why in one line (:data:`CLIPPED_NOTE`). What a summary left
out (NaN values, runs without the metric) is said under the table too (:func:`left_out_note`).
"""
from __future__ import annotations

import math

SIGNIFICANT = 2         # significant digits of the uncertainty
PLAIN = 6               # significant digits of a value with no uncertainty to go by (more if its integer part has)
TINY = 1e-6             # below this a value with no uncertainty is printed with an exponent (1.23457e-07)
CLIPPED = "\u2020"       # after an interval end clipped at the quantity's bounds
CLIPPED_NOTE = (f"{CLIPPED} 95 % interval clipped at the quantity's bounds (study.json's metric_bounds; [-1, 1] "
                "for a difference of shares or of a true/false state): a t interval from few replicates can reach "
                "past what the quantity can take.")


def decimals(uncertainty: float | None) -> int | None:
    """Decimals that show ``uncertainty`` (a half-width or an sd) to two significant digits; None when
    there is none to go by (one replicate, or all replicates equal)."""
    if uncertainty is None or not math.isfinite(uncertainty) or uncertainty <= 0:
        return None
    return min(12, max(0, SIGNIFICANT - 1 - math.floor(math.log10(uncertainty))))


def plain(value: float) -> str:
    """A value with no uncertainty to go by, without an exponent, to :data:`PLAIN` significant digits or more:
    never a rounding that changes its integer part, and a value that is not an integer never printed as one.
    ``12345``, ``1.0000852`` as ``1.00009``, ``1234567.89`` as ``1234567.9``, ``0.99999997`` as ``0.99999997``
    (not ``1``), ``0.000123456789`` as ``0.000123457``; below :data:`TINY` (and not 0), with an exponent
    (``1.23457e-07``), which no one reads as another number."""
    if float(value).is_integer():
        text = f"{value:.0f}"
    elif abs(value) < TINY:
        text = f"{value:.{PLAIN}g}"
    else:
        places = max(1, PLAIN - 1 - math.floor(math.log10(abs(value))))
        text = f"{value:.{places}f}"
        while math.trunc(float(text)) != math.trunc(value) and places < 17:     # 0.99999997 is not 1.000000
            places += 1
            text = f"{value:.{places}f}"
        shorter = text.rstrip("0")
        if not shorter.endswith("."):       # 1.0000000001 stays 1.00000, not 1
            text = shorter
    return "0" if text.startswith("-") and float(text) == 0 else text


def show(value: float | None, places: int | None) -> str:
    """``value`` to ``places`` decimals (``None``: :func:`plain`); "" for no value."""
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if places is None:
        return plain(value)
    text = f"{value:.{places}f}"
    return "0" + text[2:] if text.startswith("-0") and float(text) == 0 else text     # no "-0.000"


def estimate_cells(mean: float | None, sd: float | None, low: float | None, high: float | None,
                   clipped: tuple[bool, bool] = (False, False), half: float | None = None) -> list[str]:
    """The printed mean, sd, low and high of one summary row, all to the digits the interval supports (its
    half-width ``half``, by default half of high - low); an end clipped at the quantity's bounds (``clipped``:
    low, high) ends in CLIPPED."""
    if half is None:
        half = (high - low) / 2 if low is not None and high is not None else sd
    places = decimals(half)
    sd_places = decimals(sd)
    return [show(mean, places), show(sd, sd_places),
            show(low, places) + (CLIPPED if clipped[0] else ""), show(high, places) + (CLIPPED if clipped[1] else "")]


def row_cells(row: dict) -> list[str]:
    """:func:`estimate_cells` of a summary row (``describe``'s keys: mean, sd, ci_low, ci_high, n and the clipped
    flags). A clipped interval is printed to the digits of its unclipped half-width: clipping narrows what is
    shown, not the uncertainty."""
    clipped = (bool(row.get("ci_low_clipped")), bool(row.get("ci_high_clipped")))
    half = None
    if any(clipped) and row.get("sd") is not None and (row.get("n") or 0) > 1:
        from desim.experiments.sweep.summary import t975
        half = t975(row["n"] - 1) * row["sd"] / math.sqrt(row["n"])
    return estimate_cells(row.get("mean"), row.get("sd"), row.get("ci_low"), row.get("ci_high"), clipped, half)


def clipped_note(rows) -> str:
    """The line to print under a table of ``rows`` when one of their intervals was clipped; "" otherwise.

    For a whole :class:`desim.experiments.sweep.summary.SweepTable` (``sweep_table``'s, which ``desim sweep``
    prints) the line also says what the means left out (its ``note``: NaN values, runs without the metric),
    which a smaller ``n`` would otherwise only hint at."""
    from desim.experiments.sweep.summary import SweepTable
    said = [CLIPPED_NOTE if any(r.get("ci_clipped") for r in rows) else "",
            rows.note if isinstance(rows, SweepTable) else ""]
    return " ".join(n for n in said if n)


def left_out_note(rows) -> str:
    """The line to print under a table of summary ``rows`` that left values out of their means (NaN values,
    runs or pairs without the metric: ``n_nan``, ``n_missing``), per metric; "" otherwise
    (:func:`desim.experiments.sweep.summary.left_out_note`)."""
    from desim.experiments.sweep.summary import left_out_note as said
    return said(list(rows))
