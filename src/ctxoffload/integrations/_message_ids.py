"""The ids of `Msg` objects converted from a host whose messages have none (pydantic-ai's, ADK's
`Content` objects, ...): `<position>.<run>.<digest>`, the same in every process for the same
history, so a projection's decisions apply again after a restart."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from ..messages import Block

__all__ = ["message_id", "origin_of"]


def message_id(position: int, run: int, blocks: Sequence[Block]) -> str:
    """The id of the `run`-th `Msg` made from the host's message at `position`: the position
    says where it came from; the digest (16 hex digits of what the blocks say) keeps a
    history that changed shape (a host dropping its old messages) from taking another
    history's decisions (a summary standing for messages it never saw)."""
    text = json.dumps(
        [block.model_dump(mode="json") for block in blocks], sort_keys=True, ensure_ascii=False
    )
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{position}.{run}.{digest}"


def origin_of(msg_id: str) -> int | None:
    """The position of the host's message a `message_id` names, or None for an id
    `message_id` did not make (a summary the projection wrote)."""
    head, dot, _ = msg_id.partition(".")
    return int(head) if dot and head.isdigit() else None
