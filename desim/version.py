"""desim's version, in a module of its own at the bottom so that anything may import it."""
__version__ = "0.4.0"
