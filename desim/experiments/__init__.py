"""What researchers do with runs: run a study (``runs``), branch and resume (``branch``), paired effects
(``effect``), comparisons (``compare``) and sweeps (``sweep``)."""
