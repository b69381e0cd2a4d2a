"""Reading state fields: one field of every agent at every step, its kind, its distribution over time,
and the paired differences of two runs.

A state field is a typed field of the ``state`` struct (``state."opinion"``, the name quoted by
:func:`~desim.store.connection.field`, never spliced raw). "A field at every step, the initial states as
step 0" is the ``states`` view (``desim.store.schema``); the same agent at the same step in a treatment
and a control run is the ``paired_panel(treatment, control)`` macro. Every query here reads through
those two, so the panel's layout can change in one place.

**Dead agents.** A study whose agents die (Sugarscape) keeps one row per agent per step and marks the dead
with a boolean state field ``alive`` (``alive: false``). The rule, here once for every reader (the report's
bands and shares, the dashboard's charts and grid, ``desim compare``, ``desim effect``): a dead agent leaves the
distribution of every other state field at the steps it is dead, and each read says how many it left out; the
distribution of ``alive`` itself counts everyone. The grid (``grid_cells``) does not draw them either. Dead is
:func:`dead_sql`: ``alive`` is false (null, or no ``alive`` field, is living).

Two runs paired agent by agent (``paired_panel``) follow the same rule, arm by arm (:func:`pair_leaves_out_dead`):
each arm's summary of a field (its mean, its category shares) is over that arm's own living agents, as the
report's bands of each run are; a per-agent difference (treatment - control of one agent, and the share of
agents whose value differs) is taken only over the agents alive in both arms, since a dead agent's last value is
not a state it is in. An agent dead in one arm and alive in the other is left out of the per-agent differences
and counted (``dead_treatment_only``, ``dead_control_only``; ``dead_both`` for the rest): what the treatment did
to who lives is read from ``alive`` itself, paired over everyone.
"""
from __future__ import annotations

from typing import Any

import duckdb
import numpy as np

from desim.store.connection import field
from desim.store.queries import completed_effect_pairs

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
NUMERIC_TYPES = {"DOUBLE", "BIGINT", "INTEGER", "FLOAT", "UBIGINT"}
INTEGER_TYPES = {"BIGINT", "INTEGER", "UBIGINT"}


def _rows(name: str, *, text: bool = False, where: str = "", dead: bool = False) -> str:
    """``(step, agent_id, v)`` of one field of run ``$run`` (``v`` as text when ``text``, so that numbers,
    booleans and categories share one shape); ``where`` is a fixed fragment written in this module. With
    ``dead``, a fourth column ``dead``: whether the agent is dead at that step (``alive: false``)."""
    v = field("state", name)
    if text:
        v = f"CAST({v} AS VARCHAR)"
    flag = f", {dead_sql('state')} AS dead" if dead else ""
    return f"SELECT step, agent_id, {v} AS v{flag} FROM states WHERE run_id = $run {where}"


ALIVE = "alive"
"""The state field that marks dead agents (``alive: false``), see the module docstring."""


def dead_sql(state: str) -> str:
    """SQL: whether the agent whose state is the struct column ``state`` is dead in that row, its ``alive``
    false (null is living). The one definition of a dead agent every read uses (module docstring)."""
    return f"coalesce({field(state, ALIVE)} = false, false)"


def leaves_out_dead(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> bool:
    """Whether reads of field ``name`` leave dead agents out: the run's state has a boolean ``alive`` field
    and ``name`` is another field."""
    return name != ALIVE and stored_type(con, run_id, ALIVE) == "BOOLEAN"


def pair_leaves_out_dead(con: duckdb.DuckDBPyConnection, treatment: str, control: str, name: str) -> bool:
    """Whether paired reads of field ``name`` leave dead agents out (module docstring): either run's reads do."""
    return leaves_out_dead(con, treatment, name) or leaves_out_dead(con, control, name)


def has_field(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether any stored state has field ``name``."""
    try:
        con.execute(f"SELECT {field('state', name)} FROM states LIMIT 0")
        return True
    except duckdb.BinderException:
        return False


# --- one run's field over time --------------------------------------------------------------------
def values(con: duckdb.DuckDBPyConnection, run_id: str, name: str, ids: list[str]) -> list[tuple[int, str, Any]]:
    """``(step, agent_id, typed value)`` for ``ids``, by step."""
    return con.execute(f"SELECT step, agent_id, v FROM ({_rows(name)}) WHERE agent_id IN (SELECT unnest($ids)) "
                       "ORDER BY step", {"run": run_id, "ids": ids}).fetchall()


def frames(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> list[tuple[int, list, list]]:
    """Per step: ``(step, values as text by agent id, agent ids)``; a field the run lacks reads as null."""
    if has_field(con, name):
        inner = _rows(name, text=True)
    else:
        inner = "SELECT step, agent_id, NULL AS v FROM states WHERE run_id = $run"
    return con.execute(f"SELECT step, list(v ORDER BY agent_id), list(agent_id ORDER BY agent_id) FROM ({inner}) "
                       "GROUP BY step ORDER BY step", {"run": run_id}).fetchall()


# --- a positioned run: where its agents are at one step -----------------------------------------------
X, Y = "x", "y"
"""The cell fields of a positioned run (0-based integers, one agent per cell; README, ``desim viz grid``)."""


def positioned(con: duckdb.DuckDBPyConnection, run_id: str) -> bool:
    """Whether the run's agents have numeric ``x`` and ``y`` state fields: drawn on their grid (the report's
    and the dashboard's), not as a network."""
    return field_kind(con, run_id, X) == field_kind(con, run_id, Y) == "numeric"


def grid_cells(con: duckdb.DuckDBPyConnection, run_id: str, name: str, step: int, *,
               text: bool) -> tuple[list[tuple[str, float, float, Any]], int]:
    """One step of a positioned run: ``(agent_id, x, y, value of field name)`` of every living agent that has
    a position, by agent id (the value as text when ``text``, ``null`` for none, as
    :func:`category_counts` names categories; else as a number), and how many dead agents it left out (not
    drawn, see the module docstring). Step 0 is the initial states."""
    dead = stored_type(con, run_id, ALIVE) == "BOOLEAN"
    v = field("state", name)
    v = f"coalesce(CAST({v} AS VARCHAR), 'null')" if text else f"TRY_CAST({v} AS DOUBLE)"
    flag = dead_sql("state") if dead else "false"
    rows = con.execute(f"SELECT agent_id, CAST({field('state', X)} AS DOUBLE), CAST({field('state', Y)} AS DOUBLE), "
                       f"{v}, {flag} FROM states WHERE run_id = $run AND step = $step ORDER BY agent_id",
                       {"run": run_id, "step": step}).fetchall()
    shown = [r[:4] for r in rows if not r[4] and r[1] is not None and r[2] is not None]
    return shown, sum(1 for r in rows if r[4])


def grid_extent(con: duckdb.DuckDBPyConnection, run_id: str) -> tuple[int | None, int | None]:
    """The largest ``x`` and ``y`` any agent of the run has at any step (None: no positions)."""
    x, y = con.execute(f"SELECT max(CAST({field('state', X)} AS BIGINT)), max(CAST({field('state', Y)} AS BIGINT)) "
                       "FROM states WHERE run_id = $run", {"run": run_id}).fetchone()
    return x, y


def value_range(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> tuple[float | None, float | None]:
    """The smallest and largest value of a numeric field over the run's living agents at every step (the
    colour scale on which a run's frames compare)."""
    dead = leaves_out_dead(con, run_id, name)
    where = "WHERE NOT dead" if dead else ""
    return tuple(con.execute(f"SELECT min(TRY_CAST(v AS DOUBLE)), max(TRY_CAST(v AS DOUBLE)) "
                             f"FROM ({_rows(name, dead=dead)}) {where}", {"run": run_id}).fetchone())


def numbers_by_step(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> tuple[Any, Any]:
    """``(step, x)``: two arrays, one entry per agent per step in step order, ``x`` the agent's value of field
    ``name`` as a double (NaN for null, a dead agent's, or a value that is no number). As numpy arrays, not
    Python lists: a report's density of a 5,000,000-row panel held 600 MB more as lists."""
    dead = leaves_out_dead(con, run_id, name)
    x = "CASE WHEN dead THEN NULL ELSE TRY_CAST(v AS DOUBLE) END" if dead else "TRY_CAST(v AS DOUBLE)"
    got = con.execute(f"SELECT step, coalesce({x}, 'NaN'::DOUBLE) AS x FROM ({_rows(name, dead=dead)})",
                      {"run": run_id}).fetchnumpy()
    order = np.argsort(got["step"], kind="stable")  # here rather than in DuckDB: its sort held 300 MB more
    return np.asarray(got["step"], dtype=np.int64)[order], np.asarray(got["x"], dtype=np.float64)[order]


def categories(con: duckdb.DuckDBPyConnection, run_id: str, name: str, most: int = 64) -> list[str]:
    """The values a categorical field takes among the run's living agents, as text (``null`` for none), as
    :func:`category_counts` names them; at most ``most``."""
    dead = leaves_out_dead(con, run_id, name)
    where = "WHERE NOT dead" if dead else ""
    return [r[0] for r in con.execute(      # sorted before the limit: the same categories every time
        f"SELECT DISTINCT coalesce(CAST(v AS VARCHAR), 'null') AS c FROM ({_rows(name, dead=dead)}) {where} "
        "ORDER BY c LIMIT $most", {"run": run_id, "most": most}).fetchall()]


def typed_frames(con: duckdb.DuckDBPyConnection, run_id: str, name: str,
                 until: int | None = None) -> tuple[list[int], list[list[Any]]]:
    """Steps 0..``until`` (all when None) of one field of every agent, typed: ``(steps, values[step][agent])``,
    agents in id order, dead ones included (a grid layer replays what every agent did)."""
    rows = con.execute(f"SELECT step, list(v ORDER BY agent_id) FROM ({_rows(name)}) "
                       "WHERE $until IS NULL OR step <= $until GROUP BY step ORDER BY step",
                       {"run": run_id, "until": until}).fetchall()
    return [r[0] for r in rows], [r[1] for r in rows]


def field_names(con: duckdb.DuckDBPyConnection, run_id: str) -> list[str]:
    """The state fields the run stored a value for, in the panel's order: what a misspelt field is told."""
    try:
        names = [d[0] for d in con.execute("SELECT state.* FROM panel LIMIT 0").description]
    except duckdb.Error:          # no panel yet, or a state that is not a struct
        return []
    if not names:
        return []
    counts = con.execute("SELECT " + ", ".join(f"count({field('state', n)})" for n in names)
                         + " FROM panel WHERE run_id = ?", [run_id]).fetchone()
    return [n for n, c in zip(names, counts) if c]


def stored_type(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> str | None:
    """The DuckDB type of the field's first non-null value in the run's panel (None: no such field)."""
    try:
        row = con.execute(f"SELECT typeof({field('state', name)}) FROM panel WHERE run_id = ? "
                          f"AND {field('state', name)} IS NOT NULL LIMIT 1", [run_id]).fetchone()
    except duckdb.BinderException:
        row = None
    return row[0] if row else None


def field_kind(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> str | None:
    """``numeric`` or ``categorical`` (text and booleans) from the field's stored type; None: no such field.
    How a field is paired: numbers by their difference, categories by who differs and the category shares."""
    typ = stored_type(con, run_id, name)
    if typ is None:
        return None
    return "numeric" if typ in NUMERIC_TYPES else "categorical"


FEW_VALUES = 8
"""An integer state taking at most this many values is a category (drawn as shares, not as a band)."""


def few_valued_integer(con: duckdb.DuckDBPyConnection, run_id: str, name: str, most: int = FEW_VALUES) -> bool:
    """Whether the field is an integer taking at most ``most`` values in the run (Schelling's ``type``, a 0/1
    flag): drawn over time as the share of agents per value, since a 0-1 quantile band says nothing."""
    if stored_type(con, run_id, name) not in INTEGER_TYPES:
        return False        # a float, text or boolean field needs no scan of its values
    v = field("state", name)
    return con.execute(f"SELECT count(*) FROM (SELECT DISTINCT {v} FROM panel WHERE run_id = ? AND {v} IS NOT NULL "
                       "LIMIT ?)",
                       [run_id, most + 1]).fetchone()[0] <= most


def quantile_bands(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> dict[str, list]:
    """Per step: the 5/25/50/75/95 % quantiles, the mean and the number of values (``n``) of a numeric field,
    over the living agents (``left_out``: the dead agents left out at each step, all 0 when the run's agents
    do not die; see the module docstring)."""
    dead = leaves_out_dead(con, run_id, name)
    keep = "FILTER (WHERE NOT dead)" if dead else ""
    rows = con.execute(
        f"SELECT step, quantile_cont(TRY_CAST(v AS DOUBLE), {list(QUANTILES)}) {keep}, "
        f"avg(TRY_CAST(v AS DOUBLE)) {keep}, count(v) {keep}, "
        f"{'count(*) FILTER (WHERE dead)' if dead else '0'} "
        f"FROM ({_rows(name, dead=dead)}) GROUP BY step ORDER BY step", {"run": run_id}).fetchall()
    return {"steps": [r[0] for r in rows], "quantiles": [r[1] for r in rows], "mean": [r[2] for r in rows],
            "n": [r[3] for r in rows], "left_out": [r[4] for r in rows]}


def category_counts(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> dict[str, Any]:
    """Per step, how many agents are in each category of a categorical field (categories as text, ``null``
    for no value), over the living agents (``left_out``: the dead agents left out at each step; see the
    module docstring)."""
    dead = leaves_out_dead(con, run_id, name)
    rows = con.execute(f"SELECT step, coalesce(CAST(v AS VARCHAR), 'null') AS c, {'dead' if dead else 'false'} "
                       f"AS gone, count(*) FROM ({_rows(name, dead=dead)}) GROUP BY ALL ORDER BY step, c",
                       {"run": run_id}).fetchall()
    steps = sorted({r[0] for r in rows})
    pos = {s: i for i, s in enumerate(steps)}
    cats = sorted({c for _, c, gone, _ in rows if not gone})
    counts = {c: [0] * len(steps) for c in cats}
    left_out = [0] * len(steps)
    for step, c, gone, n in rows:
        if gone:
            left_out[pos[step]] += n
        else:
            counts[c][pos[step]] = n
    return {"steps": steps, "categories": cats, "counts": counts, "left_out": left_out}


def display_kind(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> str | None:
    """How a field is drawn over time, from its stored type: ``boolean``; ``categorical`` for text (and JSON)
    and for an integer taking few values (:func:`few_valued_integer`, Schelling's ``type``: its shares per
    value); ``numeric`` (quantile bands) for other numbers; None when the run has no such field."""
    typ = stored_type(con, run_id, name)
    if typ is None:
        return None
    if typ == "BOOLEAN":
        return "boolean"
    if typ not in NUMERIC_TYPES:
        return "categorical"
    return "categorical" if few_valued_integer(con, run_id, name) else "numeric"


# --- two runs, agent by agent -----------------------------------------------------------------------
def _paired(name: str, dead: bool, *, text: bool = False, raw: bool = False, until: bool = False) -> str:
    """``(step, agent_id, t, c, t_dead, c_dead)`` of ``paired_panel($t, $c)`` (with ``until := $until`` when
    ``until``): field ``name`` of the same agent at the same step in the treatment and the control, as a number
    (as text when ``text``, as stored when ``raw``). With ``dead`` (:func:`pair_leaves_out_dead`), ``t_dead`` and
    ``c_dead`` say whether the agent is dead in that arm and a dead agent's value is null there, so that every
    aggregate of ``t``, of ``c`` and of ``t - c`` is over the living (module docstring); without, both are false."""
    cols = []
    for arm, struct in (("t", "treatment_state"), ("c", "control_state")):
        v = field(struct, name)
        v = v if raw else f"CAST({v} AS VARCHAR)" if text else f"TRY_CAST({v} AS DOUBLE)"
        if dead:
            gone = dead_sql(struct)
            cols.append(f"CASE WHEN {gone} THEN NULL ELSE {v} END AS {arm}, {gone} AS {arm}_dead")
        else:
            cols.append(f"{v} AS {arm}, false AS {arm}_dead")
    return (f"SELECT step, agent_id, {', '.join(cols)} "
            f"FROM paired_panel($t, $c{', until := $until' if until else ''})")


BOTH_ALIVE = "FILTER (WHERE NOT t_dead AND NOT c_dead)"
"""The aggregates of per-agent differences: over the agents alive in both arms (module docstring)."""
LEFT_OUT = ("count(*) FILTER (WHERE t_dead AND NOT c_dead), count(*) FILTER (WHERE c_dead AND NOT t_dead), "
            "count(*) FILTER (WHERE t_dead AND c_dead)")
"""The agents left out of the per-agent differences: dead in the treatment only, in the control only, in both."""
DEAD_KEYS = ("dead_treatment_only", "dead_control_only", "dead_both")


def paired_quantiles(con: duckdb.DuckDBPyConnection, treatment: str, control: str, name: str) -> dict[str, list]:
    """Per step: quantiles and mean of treatment minus control over agents, and the number of pairs; the agents
    dead in either run are left out of all three (``left_out``: how many, all 0 when the runs' agents do not
    die; module docstring), and a step where no agent is alive in both runs is not listed."""
    dead = pair_leaves_out_dead(con, treatment, control, name)
    rows = con.execute(f"SELECT step, quantile_cont(t - c, {list(QUANTILES)}), avg(t - c), count(*) {BOTH_ALIVE}, "
                       f"count(*) FILTER (WHERE t_dead OR c_dead) FROM ({_paired(name, dead)}) "
                       "GROUP BY step ORDER BY step", {"t": treatment, "c": control}).fetchall()
    rows = [r for r in rows if r[3]]
    return {"steps": [r[0] for r in rows], "quantiles": [r[1] for r in rows],
            "mean": [r[2] for r in rows], "pairs": [r[3] for r in rows], "left_out": [r[4] for r in rows]}


def paired_changed_share(con: duckdb.DuckDBPyConnection, treatment: str, control: str, name: str) -> dict[str, list]:
    """Per step: the share of agents whose value differs between the runs, and the number of pairs, over the
    agents alive in both runs (``left_out``: the agents dead in either; module docstring)."""
    dead = pair_leaves_out_dead(con, treatment, control, name)
    rows = con.execute(f"SELECT step, avg(CASE WHEN t IS DISTINCT FROM c THEN 1.0 ELSE 0.0 END) {BOTH_ALIVE}, "
                       f"count(*) {BOTH_ALIVE}, count(*) FILTER (WHERE t_dead OR c_dead), {LEFT_OUT} "
                       f"FROM ({_paired(name, dead, raw=True)}) GROUP BY step ORDER BY step",
                       {"t": treatment, "c": control}).fetchall()
    return {"steps": [r[0] for r in rows], "changed_share": [r[1] for r in rows], "pairs": [r[2] for r in rows],
            "left_out": [r[3] for r in rows], "leaves_out_dead": dead,
            **{k: [r[4 + i] for r in rows] for i, k in enumerate(DEAD_KEYS)}}


def paired_summary(con: duckdb.DuckDBPyConnection, treatment: str, control: str, name: str) -> list[dict[str, Any]]:
    """Per step: ``{step, n, mean_diff, sd_diff, min_diff, max_diff}`` of treatment minus control over the agents
    with both values (the steps where some agent has both).

    When the runs' agents die (:func:`pair_leaves_out_dead`), the differences are over the agents alive in both,
    every step is listed (``n`` may be 0), and each row also has each arm's mean over its own living agents
    (``treatment_mean``, ``control_mean``; None when none lives), how many living agents each arm has
    (``treatment_living``, ``control_living``) and the agents left out of the differences (``dead_treatment_only``,
    ``dead_control_only``, ``dead_both``)."""
    dead = pair_leaves_out_dead(con, treatment, control, name)
    rows = con.execute(f"""
        SELECT step, count(t - c), avg(t - c), stddev_pop(t - c), min(t - c), max(t - c),
               avg(t), avg(c), count(*) FILTER (WHERE NOT t_dead), count(*) FILTER (WHERE NOT c_dead), {LEFT_OUT}
        FROM ({_paired(name, dead)}) GROUP BY step ORDER BY step""", {"t": treatment, "c": control}).fetchall()
    keys = ("step", "n", "mean_diff", "sd_diff", "min_diff", "max_diff")
    if not dead:
        return [dict(zip(keys, r[:6])) for r in rows if r[1]]
    return [dict(zip(keys + ("treatment_mean", "control_mean", "treatment_living", "control_living") + DEAD_KEYS, r))
            for r in rows]


def paired_values(con: duckdb.DuckDBPyConnection, treatment: str, control: str, name: str) -> list[tuple]:
    """``(step, agent_id, control, treatment, treatment - control)`` for every agent and step; an agent's value
    is None in a run where it is dead (and so is the difference; module docstring)."""
    dead = pair_leaves_out_dead(con, treatment, control, name)
    return con.execute(f"SELECT step, agent_id, c, t, t - c FROM ({_paired(name, dead)}) ORDER BY step, agent_id",
                       {"t": treatment, "c": control}).fetchall()


def _shares(name: str, dead: bool, until: bool) -> str:
    """Per step and category of a categorical field (as text): ``(step, category, share of the treatment's living
    agents in it, the same in the control)``; a share is None where its arm has no living agent. Categories are
    those some living agent of either arm has at some step (module docstring)."""
    return f"""
        WITH q AS ({_paired(name, dead, text=True, until=until)}),
        categories AS (SELECT t AS category FROM q WHERE t IS NOT NULL UNION SELECT c FROM q WHERE c IS NOT NULL)
        SELECT q.step, k.category, avg(CASE WHEN q.t = k.category THEN 1.0 ELSE 0.0 END) FILTER (WHERE NOT q.t_dead),
               avg(CASE WHEN q.c = k.category THEN 1.0 ELSE 0.0 END) FILTER (WHERE NOT q.c_dead)
        FROM q LEFT JOIN categories k ON true GROUP BY q.step, k.category"""


def paired_category_shares(con: duckdb.DuckDBPyConnection, treatment: str, control: str,
                           name: str) -> list[tuple]:
    """Per step and category of a categorical field (as text): ``(step, category, share of agents in it under
    treatment, the same under control)`` over the agents of ``paired_panel``, each arm's share over its own
    living agents (None where it has none; module docstring)."""
    dead = pair_leaves_out_dead(con, treatment, control, name)
    return con.execute(f"SELECT * FROM ({_shares(name, dead, until=False)}) WHERE category IS NOT NULL "
                       "ORDER BY step, category", {"t": treatment, "c": control}).fetchall()


def effect_agent_summaries(con: duckdb.DuckDBPyConnection, effect_id: str, name: str) -> list[dict[str, Any]]:
    """Per completed pair of an effect and step: ``{replicate, step, mean, mean_abs, share_changed, agents}``: the
    mean over agents of treatment - control, its mean absolute value, the share of agents that differ, and the
    agents with both values; ``leaves_out_dead`` says whether the pair's agents die (:func:`pair_leaves_out_dead`).
    Then the differences are over the agents alive in both runs (``alive_both``, with a value or not), and each row
    also has each arm's mean over its own living agents (``treatment_mean``, ``control_mean``; None when none
    lives), its living agents (``treatment_living``, ``control_living``) and the agents left out
    (``dead_treatment_only``, ``dead_control_only``, ``dead_both``; module docstring)."""
    until, pairs = completed_effect_pairs(con, effect_id)
    keys = ("replicate", "step", "mean", "mean_abs", "share_changed", "agents", "treatment_mean", "control_mean",
            "treatment_living", "control_living") + DEAD_KEYS + ("alive_both",)
    rows: list[dict[str, Any]] = []
    for replicate, treatment, control in pairs:
        dead = pair_leaves_out_dead(con, treatment, control, name)
        rows += [{**dict(zip(keys, r)), "leaves_out_dead": dead} for r in con.execute(f"""
            SELECT $replicate, step, avg(t - c), avg(abs(t - c)),
                   avg(CASE WHEN t - c <> 0 THEN 1.0 ELSE 0.0 END) {BOTH_ALIVE}, count(t - c),
                   avg(t), avg(c), count(*) FILTER (WHERE NOT t_dead), count(*) FILTER (WHERE NOT c_dead), {LEFT_OUT},
                   count(*) {BOTH_ALIVE}
            FROM ({_paired(name, dead, until=True)}) GROUP BY step""",
            {"replicate": replicate, "t": treatment, "c": control, "until": until}).fetchall()]
    return sorted(rows, key=lambda r: (r["step"], r["replicate"]))


def effect_category_shares(con: duckdb.DuckDBPyConnection, effect_id: str, name: str) -> list[tuple]:
    """Per completed pair of an effect, step and category of a categorical state field: ``(replicate, step,
    category, share of agents in it under treatment - the same under control)``; categories as text, every
    category any pair has at every step of every pair (0 where neither run of a pair has it). Each arm's share is
    over its own living agents (module docstring); a pair's step where an arm has none is left out."""
    until, pairs = completed_effect_pairs(con, effect_id)
    shares: dict[tuple[int, int], dict[str, float | None]] = {}
    for replicate, treatment, control in pairs:
        dead = pair_leaves_out_dead(con, treatment, control, name)
        for step, category, t, c in con.execute(_shares(name, dead, until=True),
                                                {"t": treatment, "c": control, "until": until}).fetchall():
            cell = shares.setdefault((replicate, step), {})
            if category is not None:
                cell[category] = None if t is None or c is None else t - c
    shares = {key: cell for key, cell in shares.items() if None not in cell.values()}
    every = sorted({k for cell in shares.values() for k in cell})
    return sorted(((replicate, step, k, cell.get(k, 0.0)) for (replicate, step), cell in shares.items()
                   for k in every), key=lambda r: (r[1], r[2], r[0]))
