"""Small vectors for unit tests."""

from __future__ import annotations

import numpy as np


def unit(*values: float) -> list[float]:
    """The vector ``values`` scaled to length 1, as a plain list (as stores hand vectors back)."""
    v = np.asarray(values, dtype=np.float32)
    return (v / np.linalg.norm(v)).tolist()
