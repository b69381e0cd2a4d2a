"""A run from Python computes with numpy's BLAS on one thread, as the command line does (desim.cli sets
OPENBLAS_NUM_THREADS=1 before numpy loads): a long dot product is rounded by how BLAS splits it among threads,
so the same rule-based study stored panels differing in the last bit from the two ways in. A number the user
chose (OPENBLAS_NUM_THREADS or OMP_NUM_THREADS) is kept."""
from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import os
    import threadpoolctl
    import desim
    CHOSEN = os.environ.get("OPENBLAS_NUM_THREADS")
    from desim import Action, DecisionModel, EnvironmentProvider, Observation

    SEEN = []

    class Env(EnvironmentProvider):
        def reset(self, seed):
            SEEN.append(max(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"))
        def observe_batch(self, ids, t, r):
            return [Observation(agent_id=a, step=t) for a in ids]
        def apply(self, actions):
            pass
        def agent_state(self, agent_id):
            return {}

    class Idle(DecisionModel):
        def decide_batch(self, observations, memories):
            return []

    if CHOSEN is None:      # as on a machine of two cores or more, whatever this one has
        threadpoolctl.threadpool_limits(2, user_api="blas")
    if os.environ.get("IMPORT_CLI"):    # a notebook that loaded numpy, then called desim.cli.main
        import desim.cli
    before = max(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas")
    desim.run_study(desim.Study(environment=Env, decision=Idle, population=2, steps=1))
    after = max(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas")
    print(before, SEEN[0], after)
''')


def blas_threads(env_extra: dict[str, str]) -> list[int]:
    import os
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", SCRIPT], env={**env, **env_extra}, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return [int(x) for x in out.stdout.split()]


def test_a_run_from_python_uses_one_blas_thread_and_gives_the_rest_back():
    assert blas_threads({}) == [2, 1, 2]


def test_a_number_the_user_chose_is_kept():
    assert blas_threads({"OPENBLAS_NUM_THREADS": "2"}) == [2, 2, 2]


def test_desim_cli_imported_after_numpy_does_not_pass_for_the_user_s_choice():
    """desim.cli sets OPENBLAS_NUM_THREADS=1 as it is imported, too late for a numpy already loaded: a run
    afterwards took the variable for the user's choice and left BLAS on its threads."""
    assert blas_threads({"IMPORT_CLI": "1"}) == [2, 1, 2]
