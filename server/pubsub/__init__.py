"""Pub/sub bus: ``memory://`` for one process, ``redis://`` across replicas."""

from .base import Bus, create_bus

__all__ = ["Bus", "create_bus"]
