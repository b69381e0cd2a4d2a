"""A study folder written from a model's text and the files' settings, for tests that need a small study of
their own (the four JSON files filled with what every such study shares)."""
from __future__ import annotations

import json
from pathlib import Path


def write_tiny_study(root: Path, model: str, simulation: dict, *, agents: int = 3, study: dict | None = None,
                     environment: dict | None = None) -> Path:
    """``root`` with ``model.py`` and its JSON files: agents ``a0``.. inline, the environment ``model:Env``
    (``environment`` adds to its file), ``simulation`` as given, ``study`` added to ``{"id": root.name}``."""
    for sub in ("simulation", "population", "environment"):
        (root / sub).mkdir(parents=True)
    (root / "model.py").write_text(model)
    (root / "study.json").write_text(json.dumps({"id": root.name, **(study or {})}))
    (root / "simulation" / "simulation.json").write_text(json.dumps(simulation))
    (root / "population" / "population.json").write_text(json.dumps({
        "personas": [{"agent_id": f"a{i}"} for i in range(agents)]}))
    (root / "environment" / "environment.json").write_text(json.dumps({
        "provider": {"ref": "model:Env"}, **(environment or {})}))
    return root
