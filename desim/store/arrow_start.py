"""Arrow without pandas: a run converts Python values to Arrow, and need not import pandas to do it.

pyarrow's first conversion of anything (``pa.array([0.0])``) imports pandas, if it is installed,
to learn whether the value might be a pandas object (apache/arrow#34994); that is about 0.2 s of
a run that never touches pandas. This module makes that first conversion with pandas out of
reach, once, so pyarrow records "no pandas integration" and moves on. It changes nothing for
code that uses pandas: ``to_pandas()``, ``pa.Table.from_pandas`` and the like import pandas
when they are called (pyarrow retries the import for them), and from then on pyarrow recognises
pandas objects again. If pandas is already imported, nothing is done.

Until then a pandas Series given to ``pa.array`` is read as the sequence of its values, which is
what desim's own conversions do with one anyway.
"""
from __future__ import annotations

import sys

import pyarrow as pa


class _NoPandas:
    """A finder that refuses pandas (``sys.modules["pandas"] = None`` is not enough: pyarrow's compiled
    import would get None back)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is kept out of pyarrow's first conversion")
        return None


def first_conversion_without_pandas() -> None:
    if "pandas" in sys.modules:
        return
    sys.meta_path.insert(0, _NoPandas)
    try:
        pa.array([0.0])
    finally:
        sys.meta_path.remove(_NoPandas)


first_conversion_without_pandas()
