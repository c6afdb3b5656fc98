"""The registry of OOD objectives; each module registers its classes on import."""
from __future__ import annotations

from ..registry import Registry

OBJECTIVES: Registry[type] = Registry("objective")
