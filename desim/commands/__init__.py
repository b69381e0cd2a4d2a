"""Sub-commands of the ``desim`` CLI, one module per area; see ``desim.cli``."""
