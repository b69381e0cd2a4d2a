"""The report's figures, drawn with matplotlib's Agg backend into PNG bytes.

Every figure is ``WIDTH`` pixels wide with a height set by its number of
panels (no tight bounding box), so the size of an image is predictable and
tests can check it. Intervention steps are drawn as dashed vertical lines
labelled with the event names; a fork step as a solid red line.
"""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

DPI = 100
WIDTH = 900
PANEL_HEIGHT = 2.3  # inches per subplot row
CONTROL_STYLE = {"color": "0.45", "linestyle": "--", "linewidth": 1.4}
TREATMENT_STYLE = {"color": "tab:blue", "linewidth": 1.8}


def figure_size(rows: int) -> tuple[float, float]:
    return WIDTH / DPI, 0.7 + PANEL_HEIGHT * rows


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return buf.getvalue()


def _subplots(rows: int):
    fig, axes = plt.subplots(rows, 1, figsize=figure_size(rows), sharex=True, squeeze=False)
    return fig, [row[0] for row in axes]


def mark_events(ax, events: dict[int, list[str]], fork: int | None = None, label: bool = True) -> None:
    """Dotted lines at intervention steps (named at the top), a red line at the fork step.

    Every figure over steps calls this, so it also keeps the step axis on whole numbers.
    """
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for step, names in sorted(events.items()):
        ax.axvline(step, color="tab:orange", linestyle=":", linewidth=1.3, zorder=0)
        if label:
            ax.annotate(", ".join(names), xy=(step, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(3, -3), textcoords="offset points", va="top", ha="left",
                        fontsize=7.5, color="tab:orange",
                        bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.8})
    if fork is not None:
        ax.axvline(fork, color="tab:red", linewidth=1.4, zorder=0)
        ax.annotate(f"fork at step {fork}", xy=(fork, 0.0), xycoords=("data", "axes fraction"),
                    xytext=(3, 3), textcoords="offset points", fontsize=7.5, color="tab:red")


def metric_trajectories(metrics: dict[str, list[tuple[int, float]]], names: list[str],
                        events: dict[int, list[str]], time_unit: str,
                        control: dict[str, list[tuple[int, float]]] | None = None,
                        labels: tuple[str, str] = ("run", "control"), fork: int | None = None) -> bytes:
    """One panel per metric over steps; with ``control``, both runs overlaid."""
    fig, axes = _subplots(len(names))
    for ax, name in zip(axes, names):
        steps, values = zip(*metrics[name]) if metrics.get(name) else ((), ())
        ax.plot(steps, values, marker="o", markersize=3, label=labels[0], **TREATMENT_STYLE)
        if control and control.get(name):
            cs, cv = zip(*control[name])
            ax.plot(cs, cv, label=labels[1], **CONTROL_STYLE)
        ax.set_ylabel(name, fontsize=9)
        ax.grid(alpha=0.3)
        mark_events(ax, events, fork)
    if control:
        axes[0].legend(fontsize=8, loc="best")
    axes[-1].set_xlabel(f"step ({time_unit})")
    fig.suptitle("Metric trajectories", fontsize=11)
    fig.subplots_adjust(left=0.1, right=0.97, top=1 - 0.45 / fig.get_figheight(), bottom=0.45 / fig.get_figheight() + 0.02, hspace=0.25)
    return png(fig)


def numeric_distribution(name: str, bands: dict[str, list], events: dict[int, list[str]], time_unit: str) -> bytes:
    """Quantile bands (5-95 %, 25-75 %), the median and the mean of a numeric state field."""
    fig, (ax,) = _subplots(1)
    steps = bands["steps"]
    q = list(zip(*bands["quantiles"])) if steps else [()] * 5
    ax.fill_between(steps, q[0], q[4], color="tab:blue", alpha=0.15, label="5-95 %")
    ax.fill_between(steps, q[1], q[3], color="tab:blue", alpha=0.35, label="25-75 %")
    ax.plot(steps, q[2], color="tab:blue", linewidth=1.8, label="median")
    ax.plot(steps, bands["mean"], color="black", linewidth=1, linestyle="--", label="mean")
    mark_events(ax, events)
    ax.set_ylabel(name)
    ax.set_xlabel(f"step ({time_unit}; 0 = initial state)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right", ncol=4)
    fig.suptitle(f"Distribution of '{name}' over time", fontsize=11)
    fig.subplots_adjust(left=0.1, right=0.97, top=0.85, bottom=0.2)
    return png(fig)


def categorical_shares(name: str, counts: dict, events: dict[int, list[str]], time_unit: str) -> bytes:
    """Stacked shares of each category of a categorical state field."""
    fig, (ax,) = _subplots(1)
    steps = counts["steps"]
    totals = [sum(counts["counts"][c][i] for c in counts["categories"]) or 1 for i in range(len(steps))]
    shares = [[n / t for n, t in zip(counts["counts"][c], totals)] for c in counts["categories"]]
    ax.stackplot(steps, *shares, labels=counts["categories"], colors=category_colors(counts["categories"]),
                 alpha=0.9)
    mark_events(ax, events)
    ax.set_ylim(0, 1)
    ax.set_xlim(min(steps, default=0), max(steps, default=1))
    ax.set_ylabel("share of agents")
    ax.set_xlabel(f"step ({time_unit}; 0 = initial state)")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle(f"Shares of '{name}' over time", fontsize=11)
    fig.subplots_adjust(left=0.1, right=0.84, top=0.85, bottom=0.2)
    return png(fig)


def metric_differences(diffs: dict[str, list[tuple[int, float]]], events: dict[int, list[str]],
                       fork: int | None, time_unit: str, title: str) -> bytes:
    """Treatment minus control per step, one panel per metric, the fork step marked."""
    names = list(diffs)
    fig, axes = _subplots(max(1, len(names)))
    for ax, name in zip(axes, names):
        if diffs[name]:
            steps, values = zip(*diffs[name])
            ax.bar(steps, values, color=["tab:green" if v >= 0 else "tab:purple" for v in values], width=0.7)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_ylabel(f"Δ {name}", fontsize=9)
        ax.grid(alpha=0.3)
        mark_events(ax, events, fork)
    axes[-1].set_xlabel(f"step ({time_unit})")
    fig.suptitle(title, fontsize=11)
    fig.subplots_adjust(left=0.1, right=0.97, top=1 - 0.45 / fig.get_figheight(), bottom=0.45 / fig.get_figheight() + 0.02, hspace=0.25)
    return png(fig)


def paired_differences(name: str, kind: str, data: dict[str, list], fork: int | None, time_unit: str) -> bytes:
    """Per-agent treatment minus control: quantile bands of the differences, or the share changed."""
    fig, (ax,) = _subplots(1)
    steps = data["steps"]
    if kind == "numeric":
        q = list(zip(*data["quantiles"])) if steps else [()] * 5
        ax.fill_between(steps, q[0], q[4], color="tab:green", alpha=0.15, label="5-95 % of agents")
        ax.fill_between(steps, q[1], q[3], color="tab:green", alpha=0.35, label="25-75 %")
        ax.plot(steps, data["mean"], color="black", linewidth=1.5, label="mean difference")
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_ylabel(f"Δ {name} per agent")
        ax.legend(fontsize=8, loc="lower right", ncol=3)
    else:
        ax.plot(steps, data["changed_share"], color="tab:green", marker="o", markersize=3)
        ax.set_ylim(0, 1)
        ax.set_ylabel(f"share with a different {name}")
    mark_events(ax, {}, fork)
    ax.grid(alpha=0.3)
    ax.set_xlabel(f"step ({time_unit})")
    fig.suptitle(f"Per-agent paired differences in '{name}' (treatment minus control)", fontsize=11)
    fig.subplots_adjust(left=0.1, right=0.97, top=0.85, bottom=0.2)
    return png(fig)


PALETTE = ["#4c78a8", "#e45756", "#54a24b", "#f58518", "#b279a2", "#72b7b2", "#eeca3b", "#9d755d",
           "#ff9da6", "#bab0ac"]


def category_colors(categories: list[str]) -> list[str]:
    """A fixed colour per category position (sorted names), shared by reports and the diffusion player."""
    return [PALETTE[i % len(PALETTE)] for i in range(len(categories))]
