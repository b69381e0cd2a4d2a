"""A run: ``assemble`` a study into a ``Run``, then ``Engine(run, source, sink)`` steps it on the SimPy
clock (``engine``, to read top to bottom); ``execute`` says how it ended; ``checks`` refuse bad study
output; ``sources`` say who decides; ``failures`` word study code's errors."""
