"""G1 configuration checks as table-driven specs: RAID, filesystem, NVMe, network."""

from .fs import (
    expected_geometry,
)
from .raid import (
    UNHEALTHY_STATE,
)
from .spec import (
    judge,
)

__all__ = [
    "UNHEALTHY_STATE",
    "expected_geometry",
    "judge",
]
