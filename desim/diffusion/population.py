"""``Nodes``: a population of ``n`` plain nodes, for a diffusion study without a roster.

``population.json``: ``{"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": 10000}},
"interaction": {"kind": "barabasi_albert", "m": 3}}``. Agent ids are ``prefix`` plus the
position, zero-padded to one width (``n0000`` ... ``n9999``), so they sort in population
order. The personas carry no attributes; a study whose nodes differ (a recovery rate, a
threshold) lists them in a roster file instead (``"roster": "nodes.csv"``, one column per
attribute) and names the column in the model's args (``{"attribute": "recovery_rate"}``).
"""
from __future__ import annotations

from desim.errors import StudyConfigError
from desim.records import Persona
from desim.study.contract import PopulationProvider
from desim.versions import POPULATION_FILE


class Nodes(PopulationProvider):
    """``n`` plain nodes with no attributes, for a diffusion study without a roster.

    Parameters: ``n``, an integer >= 1 (default 1000); ``prefix``, text (default ``"n"``): the ids are the
    prefix and the position padded with zeros to one width (``n000`` ... ``n999``)."""

    def __init__(self, n: int = 1000, prefix: str = "n"):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise StudyConfigError(POPULATION_FILE, [("provider.args.n", f"must be an integer >= 1 "
                                                                   f"(got {n!r})")])
        if not isinstance(prefix, str):
            raise StudyConfigError(POPULATION_FILE, [("provider.args.prefix", "must be text")])
        self.n, self.prefix = n, prefix

    def personas(self, rng):
        key = (self.n, self.prefix)
        made = _MADE.get(key)
        # the same plain nodes for every run of the process (replicates, sweeps), unless a run's study wrote on
        # them (an attribute kept on a persona): then the next run gets nodes of its own, as it would alone
        if made is None or any(p.attributes or p.description for p in made):
            width = len(str(self.n - 1))
            make, prefix = Persona.model_construct, self.prefix
            _MADE.clear()
            _MADE[key] = tuple(make(agent_id=f"{prefix}{i:0{width}d}", attributes={}, description="")
                               for i in range(self.n))
        return list(_MADE[key])


_MADE: dict[tuple[int, str], tuple[Persona, ...]] = {}
