"""A network file rewritten with its size and modification time kept is read anew.

``cp -p``, ``rsync -t`` or ``tar x`` of another version's network file leave its size and mtime as they were. The
parsed network used to be kept per process by (path, size, mtime): the second run of a notebook was recorded as a
new version, with the new file's hash, while its ``edges`` table held the old weights. The cache is keyed on the
file's content hash now, the hash the version records.
"""
from __future__ import annotations

import hashlib
import json
import os

import desim
from tiny_models import stay_model
from tiny_study import write_tiny_study

MODEL = stay_model('{"here": True}')


def network(weight: str) -> str:
    return f"source,target,weight\na0,a1,{weight}\na1,a2,0.25\n"


def test_a_network_file_rewritten_with_its_size_and_mtime_kept_is_read_anew(tmp_path):
    root = write_tiny_study(tmp_path / "net", MODEL, {"n_steps": 1, "decision": {"ref": "model:Decide"}}, agents=3)
    population = root / "population" / "population.json"
    population.write_text(json.dumps({**json.loads(population.read_text()),
                                      "interaction": {"kind": "file", "path": "net.csv"}}))
    path = root / "population" / "net.csv"
    path.write_text(network("0.5"))
    first = desim.run_study(desim.load_study(root))
    before = os.stat(path)
    path.write_text(network("0.9"))                                   # same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))       # same modification time, as cp -p leaves it
    assert (os.stat(path).st_size, os.stat(path).st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    second = desim.run_study(desim.load_study(root))

    data = desim.open(root)
    weights = {r: sorted(zip(*[data.edges(run=r).column(c).to_pylist() for c in ("source", "target", "weight")]))
               for r in (first.run_id, second.run_id)}
    assert weights[first.run_id] == [("a0", "a1", 0.5), ("a1", "a2", 0.25)]
    assert weights[second.run_id] == [("a0", "a1", 0.9), ("a1", "a2", 0.25)]     # before the fix: 0.5 again
    # and the second run's version records the file it read (its hash worked out here by hand)
    rows = {r["run_id"]: r for r in data.runs().to_pylist()}
    recorded = json.loads(rows[second.run_id]["code"])["population/net.csv"]
    assert recorded == hashlib.sha256(network("0.9").encode()).hexdigest()[:16]
    assert rows[first.run_id]["version_id"] != rows[second.run_id]["version_id"]
