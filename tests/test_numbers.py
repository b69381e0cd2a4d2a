"""Printed estimates carry the digits their interval supports, no more; the stored ones keep all."""
from __future__ import annotations

import re

import desim
from desim.cli import main
from desim.experiments.sweep import sweep_table
from desim.report.numbers import decimals, estimate_cells, show
from walk_study import write_walk_study


def test_an_estimate_is_printed_to_two_significant_digits_of_its_interval():
    assert estimate_cells(-0.000800925, 0.0101, -0.0132, 0.0116) == ["-0.001", "0.010", "-0.013", "0.012"]
    assert estimate_cells(12345.6, 300.0, 12000.4, 12700.2) == ["12346", "300", "12000", "12700"]
    assert estimate_cells(0.5, None, None, None) == ["0.5", "", "", ""]           # one replicate: no interval
    assert decimals(0.0) is None and show(-0.0004, 3) == "0.000"                  # no "-0.000"


def test_the_sweep_prints_rounded_and_keeps_every_digit(tmp_path, capsys):
    root = write_walk_study(tmp_path / "walk", n_steps=6)
    assert main(["sweep", str(root), "--set", "lockdown_day=2,3", "--replicates", "3", "--workers", "1",
                 "--metrics", "mean_x"]) == 0
    out = capsys.readouterr().out
    sweep_id = re.search(r"sweep (sw\w+):", out).group(1)
    stored = {r["lockdown_day"]: r for r in sweep_table(root, sweep_id, ["mean_x"])}
    for day, row in stored.items():
        printed = next(line for line in out.splitlines() if line.split()[:1] == [str(day)] and "mean_x" in line)
        mean, sd, low, high = estimate_cells(row["mean"], row["sd"], row["ci_low"], row["ci_high"])
        assert printed.split()[2:6] == [mean, sd, low, high]
        assert len(repr(row["mean"])) > len(mean)             # the table returned keeps the full float
