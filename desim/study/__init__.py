"""The study: its files (``files``), parameters (``params``), the contract its code implements
(``contract``), its network, interventions and refs, and ``Study``, the same thing built in Python."""
