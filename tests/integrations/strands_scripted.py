"""A base for scripted Strands models: everything a `Model` needs but `stream`.

Imports Strands: use it only after `require_framework("strands", "strands")`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from strands.models.model import Model

__all__ = ["ScriptedModelBase"]


class ScriptedModelBase(Model):
    """A Strands `Model` with no configuration and no structured output; subclasses play
    their script in `stream`."""

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    async def structured_output(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError
        yield
