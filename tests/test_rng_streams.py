"""``ctx.rng(name)``: one generator per (name, step, round), which continues its sequence for every call in
that round however many streams the round and the run have drawn from (a branch replays steps without
drawing, so the streams in use must never depend on what was drawn before)."""
from __future__ import annotations

from desim.study.contract import RunContext
from desim.study.rng import Streams


def context(seed: int = 3) -> RunContext:
    return RunContext(sim=None, clock=None, streams=Streams(seed), personas=[], network=None, interventions=None,
                      params={}, n_steps=300, rounds=2, seed=seed, run_id="r", occupy=lambda *a: None)


def test_a_stream_continues_within_its_round_whatever_else_was_drawn():
    ctx = context()
    for step in range(1, 301):
        for r in range(2):
            ctx.step, ctx.round_idx = step, r
            first = ctx.rng("a").random()
            ctx.rng("b").random()
            for agent in range(100):        # per-agent streams: many new names in one round
                ctx.rng(f"agent-{agent}").random()
            again = ctx.rng("a").random()
            expected = Streams(3).numpy(f"a/{step}/{r}")
            assert (first, again) == (expected.random(), expected.random()), (step, r)


def test_the_draws_of_a_round_do_not_depend_on_earlier_rounds_drawn_or_skipped():
    """A replayed step draws nothing; the steps after it draw what the original run drew."""
    full, replayed = context(), context()
    for step in range(1, 120):
        full.step = step
        draws = [full.rng(n).random() for n in ("x", "y", "x")]
        if step > 80:
            replayed.step = step
            assert [replayed.rng(n).random() for n in ("x", "y", "x")] == draws, step
