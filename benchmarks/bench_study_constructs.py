"""What a line of per-agent study code costs, written plainly and written for speed (issue 30).

    python benchmarks/bench_study_constructs.py [--agents 20000] [--repeat 21] [--json PATH]
    python benchmarks/bench_study_constructs.py --agents 200 --repeat 1     # smoke

Each construct is timed over ``--agents`` agents as one round builds them: a list of records kept
alive until the round is over (fresh memory, as in a run), the cyclic collector off (as during a
run). Figures are microseconds per agent, the minimum of ``--repeat`` passes. The reference studies
are written the plain way; docs/performance.md quotes these figures.
"""
from __future__ import annotations

import argparse
import gc
import platform
import random
import time

import jsonout
from desim import Action, Observation


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=21)
    jsonout.add_option(ap)
    args = ap.parse_args()
    n = args.agents
    rng = random.Random(1)
    ids = [f"a{i:05d}" for i in range(n)]
    xs = [rng.random() * 1.2 - 0.1 for _ in range(n)]
    ks = [rng.randrange(8) for _ in range(n)]
    campaign = {"campaign_position": 0.8, "broadcasts": []}
    reach = tuple(f"{k} neighbours within reach" for k in range(64))
    empty: dict = {}
    pairs = [
        ("Observation", "keywords",
         lambda: [Observation(agent_id=a, step=1, round_idx=0, local_physical={"opinion": x},
                              macro_information=campaign, local_information={"heard": x}) for a, x in zip(ids, xs)],
         "positional, a shared empty quadrant",
         lambda: [Observation(a, 1, 0, empty, {"opinion": x}, campaign, {"heard": x}) for a, x in zip(ids, xs)]),
        ("Action", "keywords",
         lambda: [Action(agent_id=a, step=1, kind="post", payload={"opinion": x}, rationale="r")
                  for a, x in zip(ids, xs)],
         "positional",
         lambda: [Action(a, 1, "post", {"opinion": x}, "r") for a, x in zip(ids, xs)]),
        ("rationale", "f-string", lambda: [f"{k} neighbours within reach" for k in ks],
         "from a tuple made once", lambda: [reach[k] for k in ks]),
        ("clip to [0, 1]", "min(max(x, 0.0), 1.0)", lambda: [min(max(x, 0.0), 1.0) for x in xs],
         "comparisons", lambda: [0.0 if x < 0.0 else 1.0 if x > 1.0 else x for x in xs]),
        ("round to 9 digits", "round(x, 9)", lambda: [round(x, 9) for x in xs], "not at all", lambda: [x for x in xs]),
    ]
    gc.disable()

    def per_agent(fn) -> float:
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            made = fn()
            best = min(best, time.perf_counter() - t0)
            del made
        return best / n * 1e6

    print(f"{n:,} agents, minimum of {args.repeat} passes, Python {platform.python_version()}")
    print("| what | plain | µs per agent | for speed | µs per agent | plain costs more by |")
    print("|---|---|---:|---|---:|---:|")
    rows = []
    for what, plain, plain_fn, fast, fast_fn in pairs:
        a, b = per_agent(plain_fn), per_agent(fast_fn)
        rows.append({"what": what, "plain": plain, "plain_us": a, "fast": fast, "fast_us": b})
        print(f"| {what} | {plain} | {a:.3f} | {fast} | {b:.3f} | {a - b:.3f} |")
    jsonout.write(args.json, {"agents": n, "repeat": args.repeat, "python": platform.python_version(), "rows": rows})


if __name__ == "__main__":
    main()
