"""``desim.config``, as studies written for an earlier desim import it: the module is now ``desim.study.files``."""
import desim.study.files as _moved

globals().update({k: v for k, v in vars(_moved).items() if not k.startswith("__")})
