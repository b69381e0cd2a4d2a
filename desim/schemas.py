"""``desim.schemas``, as studies written for an earlier desim import it: the module is now ``desim.records``."""
import desim.records as _moved

globals().update({k: v for k, v in vars(_moved).items() if not k.startswith("__")})
