"""How the diffusion components of one run find each other: through the run's ``ctx``.

The environment stores and seeds the states the model decides over, so it reads the model as
``ctx.decision``; the network's sparse rows are built once per run and kept in ``ctx.shared``.
"""
from __future__ import annotations

from desim.diffusion.network import Network, from_edges, from_graph

_NETWORK = "desim.diffusion.network"


def model_of(ctx):
    """The run's diffusion model, or None when the behaviour model is not one."""
    model = getattr(ctx, "decision", None)
    return model if getattr(model, "DIFFUSION_MODEL", False) else None


def network(ctx) -> Network:
    """The CSR of the run's network in population order, built on first use and kept for the run: from
    its edge arrays when nobody has asked for the networkx graph (a network from a file), else from
    ``ctx.graph`` (a generated one, or one study code has changed)."""
    got = ctx.shared.get(_NETWORK)
    built = ctx.network.built_graph
    if got is None or (built is not None and got.graph is not built):
        got = ctx.shared[_NETWORK] = (from_graph(ctx.graph, ctx.agent_ids, ctx.index) if built is not None
                                      else from_edges(ctx.network))
    return got
