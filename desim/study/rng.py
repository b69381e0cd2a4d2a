"""Named random streams derived from the run seed.

Every consumer of randomness (the population, the environment, the decision
model, each SimPy process of a study) asks for its own stream by name. A
stream depends only on (seed, name), so adding a process or drawing more in
one place never shifts the draws of another: runs stay comparable.
"""
from __future__ import annotations

import random
import zlib

import numpy as np


def _key(name: str) -> int:
    return zlib.crc32(name.encode("utf-8"))


class Streams:
    """Hands out ``numpy.random.Generator`` and ``random.Random`` streams by name."""

    def __init__(self, seed: int):
        self.seed = int(seed)

    def numpy(self, name: str) -> np.random.Generator:
        return np.random.default_rng([self.seed & 0xFFFFFFFFFFFFFFFF, _key(name)])

    def random(self, name: str) -> random.Random:
        return random.Random(f"{self.seed}/{name}")


def derive_seed(seed: int, *parts: object) -> int:
    """A stable 63-bit seed from a base seed and labels (used for replicates)."""
    ss = np.random.SeedSequence([int(seed) & 0xFFFFFFFFFFFFFFFF] + [_key(str(p)) for p in parts])
    return int(ss.generate_state(1, dtype=np.uint64)[0] >> 1)
