"""The LLM reference study for the LLM tests: a copy with its ``llm`` block changed, and reads of its store."""
from __future__ import annotations

import json

from storeq import read_only


def llm_study(study_copy, name="opinion_diffusion_llm", **llm):
    """A fresh copy of opinion_diffusion_llm (its base study beside it) with ``llm`` merged into its block."""
    root = study_copy("opinion_diffusion_llm", name)
    if not (root.parent / "opinion_diffusion").exists():
        study_copy("opinion_diffusion")
    path = root / "simulation" / "simulation.json"
    data = json.loads(path.read_text())
    data["llm"].update(llm)
    path.write_text(json.dumps(data))
    return root


def query(root, sql):
    con = read_only(root / "runs" / "desim.duckdb")
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def panel(root, run_id):
    return query(root, f"SELECT step, agent_id, state, action_kind, payload, action_source FROM panel "
                       f"WHERE run_id = '{run_id}' ORDER BY step, agent_id")
