"""What researchers do with runs: run a study (``run_study``), branch and resume a run (``branch``,
``resume``), paired effects over replicates (``effect``, ``effect_table``) and comparisons
(``compare``). These functions are named here (``desim.experiments.branch``); their modules are
``runs``, ``branches``, ``effects`` and ``comparisons``.

Sweeps are a package of their own, ``desim.experiments.sweep``, imported by name rather than reached
as an attribute of this one: ``from desim.experiments.sweep import run_sweep``, or as before
``from desim.sweep import run_sweep``."""

_WHERE = {"run_study": ("runs", "run_study"), "branch": ("branches", "branch"), "resume": ("branches", "resume"),
          "effect": ("effects", "run_effect"), "effect_table": ("effects", "effect_table"),
          "compare": ("comparisons", "compare")}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'desim.experiments' has no attribute {name!r}")
    import importlib
    module, attr = _WHERE[name]
    value = getattr(importlib.import_module(f"desim.experiments.{module}"), attr)
    globals()[name] = value
    return value
