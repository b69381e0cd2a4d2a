"""How the diffusion components of one run find each other: through the run's ``ctx``.

The environment stores and seeds the states the model decides over, so it reads the model as
``ctx.decision``; the network's sparse rows are built once per run and kept in ``ctx.shared``.
"""
from __future__ import annotations

from desim.diffusion.network import Network, from_graph

_NETWORK = "desim.diffusion.network"


def model_of(ctx):
    """The run's diffusion model, or None when the behaviour model is not one."""
    model = getattr(ctx, "decision", None)
    return model if getattr(model, "DIFFUSION_MODEL", False) else None


def network(ctx) -> Network:
    """The CSR of ``ctx.graph`` in population order, built on first use and kept for the run."""
    got = ctx.shared.get(_NETWORK)
    if got is None or got.graph is not ctx.graph:
        got = ctx.shared[_NETWORK] = from_graph(ctx.graph, ctx.agent_ids, ctx.index)
    return got
