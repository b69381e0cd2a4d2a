"""``desim.network``, as studies written for an earlier desim import it: the module is now ``desim.study.network``."""
import desim.study.network as _moved

globals().update({k: v for k, v in vars(_moved).items() if not k.startswith("__")})
