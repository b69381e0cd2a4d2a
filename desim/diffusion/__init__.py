"""Classic diffusion models on desim's columnar path, usable from ``study.json`` with no ``model.py``.

A study names the parts by ref::

    environment.json   "provider": {"ref": "desim.diffusion:NetworkState", "args": {"seeds": 10}}
    simulation.json    "decision": {"ref": "desim.diffusion:SIR", "args": {"beta": "$beta", "gamma": 0.1}}
                       "collector": {"ref": "desim.diffusion:Prevalence"}
    population.json    "provider": {"ref": "desim.diffusion:Nodes", "args": {"n": 10000}}  (or personas / a roster)

Models (each class's docstring gives its exact update, parameters and NDlib/EoN counterpart):

* epidemics (``compartmental``): ``SI``, ``SIR``, ``SIS``, ``SEIR`` -- synchronous, per edge;
* cascades and thresholds: ``IndependentCascade`` (synchronous, per edge, one try per edge),
  ``LinearThreshold`` (synchronous, per node, deterministic);
* discrete opinions (``opinion``): ``Voter`` (asynchronous by default), ``MajorityRule``
  (synchronous neighbour majority, or Galam's random groups);
* bounded confidence (``confidence``): ``HegselmannKrause`` (synchronous), ``Deffuant``
  (asynchronous pairwise).

``NetworkState`` (``state``) holds every node's state as numpy arrays and seeds the process;
``Prevalence`` (``metrics``) gives shares, counts, incidence and cumulative incidence per step.
The network is ``ctx.graph`` as compressed sparse rows in population order (``network``); per-node
and per-edge parameters come from persona attributes and edge attributes (``params``).
``python -m pydoc desim.diffusion.SIR`` (or ``help(desim.diffusion.SIR)``) prints a class's rule; the whole
page is ``docs/diffusion.md`` in desim's source.
"""
from desim.diffusion.compartmental import SEIR, SI, SIR, SIS, IndependentCascade
from desim.diffusion.confidence import Deffuant, HegselmannKrause
from desim.diffusion.metrics import Prevalence
from desim.diffusion.opinion import MajorityRule, Voter
from desim.diffusion.population import Nodes
from desim.diffusion.state import NetworkState
from desim.diffusion.threshold import LinearThreshold

MODELS = {cls.__name__: cls for cls in (SI, SIR, SIS, SEIR, IndependentCascade, LinearThreshold, Voter,
                                         MajorityRule, HegselmannKrause, Deffuant)}

__all__ = ["SI", "SIR", "SIS", "SEIR", "IndependentCascade", "LinearThreshold", "Voter", "MajorityRule",
           "HegselmannKrause", "Deffuant", "NetworkState", "Prevalence", "Nodes", "MODELS"]
