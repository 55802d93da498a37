"""Read-only public views of the engine's private attributes (``Sprite.scale``, ``ARCBaseGame.camera``, ...)."""

from __future__ import annotations

from operator import attrgetter


def read_only(attr: str, returns: str) -> property:
    """A property that returns ``self.<attr>`` (of type `returns`, named for readers; a dotted `attr` reads
    through an attribute, as ``operator.attrgetter`` does) and cannot be assigned.
    Its getter is a C-level ``attrgetter``, so a read costs no Python call: no slower than a hand-written
    ``@property ... return self._x``, on paths that games read every frame."""
    return property(attrgetter(attr), doc=f"self.{attr} ({returns}, read-only)")
