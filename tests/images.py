"""PNG figures embedded in reports as data URIs, decoded for assertions."""
from __future__ import annotations

import base64
import io

import matplotlib.image as mpimg
import numpy as np


def decode(src: str) -> np.ndarray:
    assert src.startswith("data:image/png;base64,")
    return mpimg.imread(io.BytesIO(base64.b64decode(src.split(",", 1)[1])), format="png")
