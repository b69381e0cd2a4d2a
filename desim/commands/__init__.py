"""Sub-commands of the ``desim`` CLI, one module per area; see ``desim.cli``."""


from desim.errors import DesimError


class UserError(DesimError):
    """An error the user can act on; printed without a traceback."""
