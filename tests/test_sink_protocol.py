"""The run layer talks to storage only through ``desim.run.sink.Sink``: everything it calls on a sink is
declared there, and both sinks of the store (``MemorySink``, ``Recorder``) have each method with the
protocol's parameters, so a new sink (or a change to one) is checked against what the engine needs."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

from desim.run.sink import Sink
from desim.store.recorder import MemorySink, Recorder

RUN = Path(__file__).resolve().parent.parent / "desim" / "run"


def protocol_members() -> set[str]:
    methods = {n for n, v in vars(Sink).items() if inspect.isfunction(v) and not n.startswith("_")}
    return methods | set(Sink.__annotations__)


def used_by_the_run_layer() -> dict[str, list[str]]:
    """``sink.<name>`` and ``self.sink.<name>`` in desim/run/*.py: name -> where."""
    used: dict[str, list[str]] = {}
    for path in sorted(RUN.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute):
                continue
            owner = node.value
            if (isinstance(owner, ast.Name) and owner.id == "sink") or \
                    (isinstance(owner, ast.Attribute) and owner.attr == "sink"):
                used.setdefault(node.attr, []).append(f"{path.name}:{node.lineno}")
    return used


def test_the_run_layer_calls_only_what_the_protocol_declares():
    used = used_by_the_run_layer()
    assert {"step_zero", "open", "initial", "capture", "write", "close"} <= set(used)    # the scan sees them
    undeclared = {name: where for name, where in used.items() if name not in protocol_members()}
    assert undeclared == {}, f"the run layer uses sink members desim.run.sink.Sink does not declare: {undeclared}"


def test_both_sinks_have_every_method_with_the_protocols_parameters():
    for sink in (MemorySink, Recorder):
        for name in protocol_members():
            if name in Sink.__annotations__:       # counters: set in __init__
                assert name in inspect.getsource(MemorySink.__init__), name
                continue
            theirs = list(inspect.signature(getattr(sink, name)).parameters)
            ours = list(inspect.signature(getattr(Sink, name)).parameters)
            assert theirs == ours, f"{sink.__name__}.{name}{theirs} differs from Sink.{name}{ours}"
    counters = MemorySink()
    assert (counters.rows_written, counters.messages, counters.last_written) == (0, 0, -1)
