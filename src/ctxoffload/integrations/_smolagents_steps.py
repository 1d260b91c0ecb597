"""smolagents' memory steps as ctxoffload messages, and the summary step put in their place.

An agent rebuilds each model call from its memory: the system prompt step, then every step's
`to_messages()`. `StepMessages` turns a step into the `Msg` objects of exactly those messages (roles
as smolagents sends them: a tool call as the assistant, an observation as the user), once per
step and again only when the step changed, so the same step is the same `Msg` objects at every
call (counted once, recorded once). Each `Msg` id names its step (`<step key>.<index>`), so a
compaction can keep or move whole steps.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib
import io
import operator
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from ..exceptions import ConfigError
from ..messages import Base64Source, DataBlock, Msg, Role, TextBlock, ToolResultBlock

__all__ = [
    "INSTALL_HINT",
    "MEMORY",
    "MODELS",
    "SMOLAGENTS",
    "ContextSummaryStep",
    "StepMessages",
    "chat_messages_as_msgs",
    "step_key",
]

INSTALL_HINT = "smolagents is not installed: pip install 'ctxoffload[smolagents]'"

try:
    SMOLAGENTS: Any = importlib.import_module("smolagents")
    MEMORY: Any = importlib.import_module("smolagents.memory")
    MODELS: Any = importlib.import_module("smolagents.models")
except ImportError as exc:  # pragma: no cover - exercised where smolagents is absent
    raise ConfigError(INSTALL_HINT) from exc
"""smolagents and the modules of it the door uses, imported once, here."""

_MemoryStep: Any = MEMORY.MemoryStep
_TaskStep: Any = MEMORY.TaskStep
_ChatMessage: Any = MODELS.ChatMessage
_MessageRole: Any = MODELS.MessageRole
_ROLE_AS_SENT: dict[str, str] = {
    str(given.value): str(sent.value) for given, sent in MODELS.tool_role_conversions.items()
}
"""smolagents' own roles for a tool call and an observation, as its models send them."""
_ROLES: dict[str, Role] = {"system": "system", "user": "user", "assistant": "assistant"}


@dataclasses.dataclass
class ContextSummaryStep(_MemoryStep):  # type: ignore[misc]
    """A step ctxoffload put in an agent's memory in place of the older steps it summarised.

    The steps it stands for are in the session's context.jsonl, whose lines the summary names
    (with the files their tool results were stored in); the model is sent the summary as a
    user message, in every call and in a planning step's summary of the memory too.

    Attributes:
        messages: the summary (and the artifact index, when there is one), as ctxoffload
            messages.
    """

    messages: tuple[Msg, ...]

    def to_messages(self, summary_mode: bool = False) -> list[Any]:
        """The summary as smolagents' chat messages."""
        return [
            _ChatMessage(
                role=_MessageRole(msg.role if msg.role in _MessageRole.roles() else "user"),
                content=[{"type": "text", "text": msg.text}],
            )
            for msg in self.messages
        ]

    def dict(self) -> dict[str, Any]:
        """The step as JSON values (smolagents' `get_full_steps`)."""
        return {"summary": [m.model_dump(mode="json", exclude_none=True) for m in self.messages]}


def step_key(msg: Msg) -> str:
    """The key of the step a message of `StepMessages` came from (its id up to the index)."""
    return msg.id.rpartition(".")[0]


class StepMessages:
    """Each memory step's messages as `Msg` objects, made once per step and kept while the step is
    unchanged (the same objects in its fields)."""

    def __init__(self) -> None:
        # id(step) -> (the step, the values its messages were made from, its Msgs).
        self._known: dict[int, tuple[Any, tuple[Any, ...], list[Msg]]] = {}
        self._system: tuple[str, list[Msg]] | None = None

    def of_system(self, prompt: str) -> list[Msg]:
        """The system prompt's message: one `Msg` per text (a run makes a new prompt step;
        the same text is the same message)."""
        known = self._system
        if known is None or known[0] != prompt:
            digest = hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest()[:16]
            msg = Msg(id=f"smolagents-system-{digest}.0", role="system", content=prompt)
            known = self._system = (prompt, [msg])
        return known[1]

    def of(self, step: Any) -> list[Msg]:
        """The `Msg` objects of what `step.to_messages()` gives the model."""
        if isinstance(step, ContextSummaryStep):
            return list(step.messages)
        values = _values(step)
        known = self._known.get(id(step))
        if known is not None and known[0] is step and _same(known[1], values):
            return known[2]
        key = f"smolagents-{uuid.uuid4().hex[:20]}"
        calls = getattr(step, "tool_calls", None) or []
        msgs = chat_messages_as_msgs(
            step.to_messages(),
            key,
            requests=isinstance(step, _TaskStep),
            call_id=str(calls[0].id) if calls else None,
            call_name=",".join(dict.fromkeys(str(c.name) for c in calls)) or None,
        )
        self._known[id(step)] = (step, values, msgs)
        return msgs

    def forget_all_but(self, steps: Sequence[Any]) -> None:
        """Forget the steps no longer in the memory (bounded memory)."""
        if len(self._known) > 2 * len(steps) + 64:
            kept = {id(step) for step in steps}
            self._known = {k: v for k, v in self._known.items() if k in kept}


def chat_messages_as_msgs(
    messages: Sequence[Any],
    key: str,
    *,
    requests: bool = True,
    call_id: str | None = None,
    call_name: str | None = None,
) -> list[Msg]:
    """smolagents' `ChatMessage` objects (or their dicts) as `Msg` objects with ids `<key>.<index>`.

    Args:
        messages: the messages, as a step's `to_messages()` gives them.
        key: the ids' stem.
        requests: whether a user message is something a person asked (a task); when not
            (an observation, an error, a plan's "now proceed"), its content is carried as a
            tool result, sent as the user's as smolagents sends it, so the latest request
            stays the task's (what a compaction keeps verbatim).
        call_id: the id of the step's first tool call, for the tool results.
        call_name: the names of the step's tools, for the tool results.
    """
    out: list[Msg] = []
    for index, message in enumerate(messages):
        role_value = _role_value(_field(message, "role"))
        role = _ROLES.get(_ROLE_AS_SENT.get(role_value, role_value), "user")
        metadata = {"smolagents_role": role_value} if role != role_value else {}
        content = _blocks(_field(message, "content"))
        if role == "user" and not requests:
            result_id = call_id or f"{key}.{index}"
            name = call_name or role_value
            content = [ToolResultBlock(id=result_id, name=name, output=content)]
        out.append(Msg(id=f"{key}.{index}", role=role, content=content, metadata=metadata))
    return out


def _field(message: Any, name: str) -> Any:
    return message.get(name) if isinstance(message, dict) else getattr(message, name, None)


def _role_value(role: Any) -> str:
    return str(getattr(role, "value", role))


def _blocks(content: Any) -> str | list[Any]:
    """A smolagents message's content (text, or parts of text and PIL images) as blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    blocks: list[Any] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            blocks.append(TextBlock(text=str(part.get("text", ""))))
        elif kind == "image":
            blocks.append(_image_block(part.get("image")))
        else:
            blocks.append(TextBlock(text=str(part)))
    return blocks


def _image_block(image: Any) -> Any:
    """A PIL image (what smolagents keeps in memory) as a PNG `DataBlock`; anything else as
    the text smolagents would print for it."""
    save = getattr(image, "save", None)
    if not callable(save):
        return TextBlock(text=str(image))
    buffer = io.BytesIO()
    save(buffer, format="PNG")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return DataBlock(source=Base64Source(media_type="image/png", data=data))


_FIELDS: dict[str, tuple[str, ...]] = {
    "ActionStep": ("model_output", "tool_calls", "observations", "observations_images", "error"),
    "TaskStep": ("task", "task_images"),
    "PlanningStep": ("plan",),
}
"""The fields each step kind's `to_messages` reads (a step of another kind: all of them)."""

_GETTERS: dict[type, Callable[[Any], tuple[Any, ...]]] = {}
"""Per step class, what reads those fields as one tuple (`attrgetter`, in C: every call of
the model walks the whole memory)."""


def _values(step: Any) -> tuple[Any, ...]:
    getter = _GETTERS.get(type(step))
    if getter is None:
        names = _FIELDS.get(type(step).__name__)
        if names is None:
            names = tuple(f.name for f in dataclasses.fields(step))
        read = operator.attrgetter(*names, "__class__")  # a tuple even for one name
        getter = _GETTERS[type(step)] = read
    return getter(step)


def _same(before: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    return len(before) == len(now) and all(map(operator.is_, before, now))
