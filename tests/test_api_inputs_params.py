"""One rule for a parameter's type, whatever the way in (``--set`` text, ``params=`` from Python, a sweep's
grid, an effect's arms): ``desim.study.params.typed_value``. A value from Python must be of the declared kind
already (a numpy scalar is taken as the Python value of that kind); a bool is no number, a float no int."""
from __future__ import annotations

import math

import numpy as np
import pytest

from desim.study.params import typed_value

INT, FLOAT, BOOL, TEXT = 500, 0.3, False, "hegselmann_krause"      # declared defaults, as simulation.json holds them


@pytest.mark.parametrize("value, declared, expected", [
    (100, INT, 100),
    (np.int64(100), INT, 100),               # numpy's int: the Python int of the same value
    (np.uint8(7), INT, 7),
    ("100", INT, 100),                       # --set text, as before
    (0.25, FLOAT, 0.25),
    (np.float64(0.25), FLOAT, 0.25),
    (np.float32(0.5), FLOAT, 0.5),           # 0.5 is exact in float32
    (3, FLOAT, 3.0),                         # an int for a float, as --set x=3 is
    (np.int64(3), FLOAT, 3.0),
    ("0.25", FLOAT, 0.25),
    (True, BOOL, True),
    (np.bool_(False), BOOL, False),
    ("yes", BOOL, True),
    ("deffuant", TEXT, "deffuant"),
    (np.str_("deffuant"), TEXT, "deffuant"),
])
def test_a_value_of_the_declared_kind_becomes_its_python_value(value, declared, expected):
    got = typed_value(value, declared)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("value, declared, message", [
    (100.5, INT, "100.5 is a float, not an int"),
    (100.0, INT, "100.0 is a float, not an int: give 100 if that is meant"),
    (np.float64(100.0), INT, "np.float64(100.0) is a float, not an int: give 100 if that is meant"),
    (True, INT, "True is a bool, not an int"),                  # True == 1 would run one agent
    (np.bool_(True), INT, "np.True_ is a bool, not an int"),
    (True, FLOAT, "True is a bool, not a float"),
    (1, BOOL, "1 is an int, not true or false"),
    (0.0, BOOL, "0.0 is a float, not true or false"),
    (math.nan, FLOAT, "nan is not a finite float"),
    (np.float64(math.inf), FLOAT, "np.float64(inf) is not a finite float"),
    (10 ** 400, FLOAT, f"{10 ** 400} is not a finite float"),
    (3, TEXT, "3 is an int, not text"),
    (None, INT, "None (NoneType) is not an int"),
    ([100], INT, "[100] (list) is not an int"),
    ("100.5", INT, "'100.5' is not an int"),                     # --set text: the words it always had
    ("maybe", BOOL, "'maybe' is not true or false"),
    ("nan", FLOAT, "'nan' is not a float"),
])
def test_a_value_of_another_kind_is_refused_saying_what_it_is(value, declared, message):
    with pytest.raises(ValueError) as caught:
        typed_value(value, declared)
    assert str(caught.value) == message
