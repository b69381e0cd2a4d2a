"""``desim.interfaces``, as studies written for an earlier desim import it: the module is now ``desim.study.contract``."""
import desim.study.contract as _moved

globals().update({k: v for k, v in vars(_moved).items() if not k.startswith("__")})
