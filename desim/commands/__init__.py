"""Sub-commands of the ``desim`` CLI, one module per area; see ``desim.cli``."""


class UserError(Exception):
    """An error the user can act on; printed without a traceback."""
