"""The one hang guard for waits in the tests.

Tests wait on readiness signals (a line printed, a file written, an element drawn); this is the
generous limit that only tells a hang from slowness on a loaded machine, never a speed goal
(speed goals live in benchmarks/).
"""
import os

HANG_S = float(os.environ.get("DESIM_TEST_HANG_S", "600"))
