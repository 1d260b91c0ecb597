"""A door built but left out of its host: `LeftOut`.

A door comes in two parts a user gives its host separately: its hooks (CrewAI's hooks in a
`with offload:` block, ADK's plugin in the runner's `plugins=`) and its read-back tools (in the
agent's `tools=`). With the tools given and the hooks not, the set-up looks complete and does
nothing: a 750 KB result stayed whole in the context, nothing was stored, and nothing said so.
A door whose tools reach a run of its host (handed over for it, or called in it) where its
hooks are not says so once, as a warning of the `ctxoffload` logger, which Python's default
logging shows with nothing configured, naming the step that plugs it in (the door's
`plugged_in`).
"""

from __future__ import annotations

import logging
import threading

from .doors import Door

__all__ = ["LeftOut"]

logger = logging.getLogger("ctxoffload")


class LeftOut:
    """Whether one door object was left out of a run its tools reached, said once.

    Args:
        door: the door (its adapter, host and `plugged_in` make the warning).
    """

    def __init__(self, door: Door) -> None:
        self.door = door
        self._said = False
        self._lock = threading.Lock()

    def check(self, plugged_in: bool) -> None:
        """The door's tools reached a run of its host: said, the first time, when the door
        is not `plugged_in` to that run."""
        if plugged_in or self._said:
            return
        with self._lock:
            if self._said:
                return
            self._said = True
        door = self.door
        logger.warning(
            "%s: its tools are in a run of %s it is not plugged into, so nothing of that run is "
            "stored and each tool result stays whole in the context: %s",
            door.adapter,
            door.host,
            door.plugged_in,
        )
