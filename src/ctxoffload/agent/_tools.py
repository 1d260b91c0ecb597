"""Plain Python functions as agent tools: a JSON schema from type hints and the docstring."""

from __future__ import annotations

import asyncio
import base64
import binascii
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_type_hints

from pydantic import TypeAdapter, ValidationError

from .._depth import MAX_DEPTH, RAW_ARGUMENTS, TooDeep, load_json, too_deep
from .._disk.payloads import decode_base64, sniff_media_type
from .._search.sniff import binary_reason
from ..exceptions import InvalidContent
from ..messages import Base64Source, DataBlock, TextBlock, ToolCallBlock, ToolResultBlock

__all__ = ["Tool", "as_tool", "parse_docstring"]

_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Example|Examples):\s*$"
)
_ARG = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {argument: description})."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent = 0
    for line in lines:
        header = _SECTION.match(line)
        if header:
            section = header.group(1)
            current = None
            continue
        if section is None:
            description.append(line)
        elif section in ("Args", "Arguments", "Parameters") and line.strip():
            indent = len(line) - len(line.lstrip())
            match = _ARG.match(line)
            if match and (current is None or indent <= arg_indent):
                current = match.group(1).lstrip("*")
                arg_indent = indent
                args[current] = match.group(2).strip()
            elif current is not None:
                args[current] = f"{args[current]} {line.strip()}".strip()
    return "\n".join(description).strip(), args


_MAX_WRAPPERS = 100  # as inspect.unwrap, a bound on a chain that loops


def is_reader_function(func: Callable[..., Any]) -> bool:
    """Whether `func`, or a function it wraps (`__wrapped__`), is marked `ctxoffload_reader`."""
    seen: set[int] = set()
    current: Any = func
    for _ in range(_MAX_WRAPPERS):
        if getattr(current, "ctxoffload_reader", False) is True:
            return True
        current = getattr(current, "__wrapped__", None)
        if current is None or id(current) in seen:
            return False
        seen.add(id(current))
    return False


# A function's parameters, its type hints, and a validator for each parameter made so far.
_Checks = tuple[Mapping[str, inspect.Parameter], dict[str, Any], dict[str, TypeAdapter[Any]]]


@dataclass
class Tool:
    """A function the model can call.

    Attributes:
        name: the function's name, as the model sees it.
        description: the docstring's description.
        parameters: the JSON schema of the arguments.
        func: the function itself, sync or async.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[..., Any]
    _made_checks: tuple[Callable[..., Any], _Checks] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def is_reader(self) -> bool:
        """True when the tool reads offloaded content back, so its results are never
        offloaded again.

        Its function is marked `ctxoffload_reader = True`, as the workspace file tools and
        the retrieval tool are, or wraps one that is: the mark is looked for along the
        `__wrapped__` chain that `functools.wraps` leaves, so a decorator (a counter, a
        timer, a logger) keeps a reader a reader even when it does not copy the function's
        attributes. A wrapper that keeps neither can be marked itself
        (`wrapper.ctxoffload_reader = True`).
        """
        return is_reader_function(self.func)

    @property
    def schema(self) -> dict[str, Any]:
        """The tool in the OpenAI function-tool format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    async def run(
        self,
        call: ToolCallBlock,
        *,
        store_data: Callable[[DataBlock], Awaitable[DataBlock]] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> ToolResultBlock:
        """Run the function for one call; failures become error results, never exceptions.

        A return value of `bytes` that is binary (NUL bytes, a known magic number, or more
        than a tenth of it not UTF-8) becomes a `DataBlock` with the sniffed media type:
        an image stays inline for the model to see; anything else is stored with
        `store_data` (into data/) and named, or described when there is nowhere to store
        it. Other bytes are decoded as UTF-8, invalid bytes replaced with U+FFFD and a
        first line saying how many; text never carries lone surrogates, which no provider
        accepts.

        Args:
            call: the model's call.
            store_data: stores a block's payload and returns the block pointing at it,
                usually the offloader's `offload_data_block`.
            on_error: given the exception when the function (or reading its arguments)
                raised, so its traceback can be kept; the result is an error result still.
        """
        try:
            kwargs = self._arguments(call.input)
            if inspect.iscoroutinefunction(self.func):
                value = await self.func(**kwargs)
            else:
                value = await asyncio.to_thread(self.func, **kwargs)
                if inspect.isawaitable(value):
                    value = await value
        except Exception as exc:
            if on_error is not None:
                on_error(exc)
            return _error(call, self.name, f"{type(exc).__name__}: {exc}")
        if isinstance(value, bytes) and _is_binary(value):
            return await self._binary_result(call, value, store_data)
        try:
            output = _as_output(value)
        except InvalidContent as exc:
            return _error(
                call,
                self.name,
                f"{self.name} returned a value that cannot be shown to the model: {exc}",
            )
        return ToolResultBlock(id=call.id, name=self.name, output=output)

    async def _binary_result(
        self,
        call: ToolCallBlock,
        data: bytes,
        store_data: Callable[[DataBlock], Awaitable[DataBlock]] | None,
    ) -> ToolResultBlock:
        media_type = sniff_media_type(data)
        encoded = base64.b64encode(data).decode("ascii")
        block = DataBlock(source=Base64Source(media_type=media_type, data=encoded))
        if media_type.startswith("image/"):
            # What a tool returning a DataBlock gets: the model sees the image, and state
            # saves and compression move its bytes to data/.
            return ToolResultBlock(id=call.id, name=self.name, output=[block])
        described = f"the tool returned {len(data):,} bytes of binary data ({media_type})"
        if store_data is None:
            text = (
                f"[{described}; they were not kept: the agent has no offloader to store them "
                "in data/]"
            )
            return ToolResultBlock(id=call.id, name=self.name, output=text)
        try:
            stored = await store_data(block)
        except Exception as exc:
            return _error(call, self.name, f"{described} and they could not be stored: {exc}")
        note = TextBlock(text=f"[{described}, stored in data/ as named below]")
        return ToolResultBlock(id=call.id, name=self.name, output=[note, stored])

    def _arguments(self, raw: dict[str, Any]) -> dict[str, Any]:
        if RAW_ARGUMENTS in raw:
            text = raw[RAW_ARGUMENTS]
            shown = repr(text) if len(str(text)) <= 200 else repr(str(text)[:200]) + "..."
            if _too_deep_json(text):
                raise ValueError(
                    f"the arguments for {self.name} are nested deeper than {MAX_DEPTH} levels "
                    f"({shown}): pass flatter arguments"
                )
            raise ValueError(f"the arguments for {self.name} were not a valid JSON object: {shown}")
        parameters, hints, adapters = self._checks()
        unknown = sorted(set(raw) - set(parameters))
        if unknown:
            raise TypeError(
                f"{self.name} got unknown arguments {unknown}; it takes {sorted(parameters)}"
            )
        kwargs: dict[str, Any] = {}
        for name, param in parameters.items():
            if name not in raw:
                if param.default is inspect.Parameter.empty:
                    raise TypeError(f"{self.name} is missing the required argument {name!r}")
                continue
            adapter = adapters.get(name)
            if adapter is None:  # (made when first needed: one may fail, as the call must)
                adapter = adapters[name] = TypeAdapter(hints.get(name, Any))
            try:
                kwargs[name] = adapter.validate_python(raw[name])
            except ValidationError as exc:
                raise TypeError(f"argument {name!r} of {self.name}: {exc}") from None
        return kwargs

    def _checks(self) -> _Checks:
        """The function's parameters, its type hints and the validators made of them so far,
        kept for the function the tool holds: making them (a signature, the hints, a pydantic
        `TypeAdapter` each) cost about 1 ms a call, which a step of 100,000 calls paid
        100,000 times."""
        made = self._made_checks
        if made is not None and made[0] is self.func:
            return made[1]
        checks: _Checks = (inspect.signature(self.func).parameters, _hints(self.func), {})
        self._made_checks = (self.func, checks)
        return checks


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    try:
        return get_type_hints(func)
    except Exception:
        return {}


def _error(call: ToolCallBlock, name: str, text: str) -> ToolResultBlock:
    return ToolResultBlock(id=call.id, name=name, output=f"Error: {text}", is_error=True)


def _too_deep_json(text: Any) -> bool:
    """Whether `text` is JSON nested deeper than `MAX_DEPTH` levels."""
    if not isinstance(text, str):
        return False
    try:
        load_json(text, MAX_DEPTH)
    except TooDeep:
        return True
    except ValueError:
        return False
    return False


# Bytes that are not UTF-8, as surrogateescape decodes them (one per byte), and any lone
# surrogate: neither can be encoded as UTF-8, so no provider accepts them.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _is_binary(data: bytes) -> bool:
    """Whether bytes a tool returned are data (a file type's signature, or binary by the one
    rule of every reader, `binary_reason`) rather than text in some encoding."""
    return sniff_media_type(data) != "application/octet-stream" or binary_reason(data) is not None


def _decoded(data: bytes) -> str:
    """Bytes as text: UTF-8, with each invalid byte replaced by U+FFFD and counted."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    text, replaced = _ESCAPED_BYTE.subn("\ufffd", data.decode("utf-8", "surrogateescape"))
    were = "bytes were" if replaced != 1 else "byte was"
    return f"[{replaced} {were} not valid UTF-8 and {were[-4:]} replaced with U+FFFD]\n{text}"


def _without_surrogates(text: str) -> str:
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        clean, replaced = _SURROGATE.subn("\ufffd", text)
        if replaced == 1:
            what = "1 character was a lone surrogate (not Unicode text) and was"
        else:
            what = f"{replaced} characters were lone surrogates (not Unicode text) and were"
        return f"[{what} replaced with U+FFFD]\n{clean}"
    return text


def _checked_block(block: TextBlock | DataBlock) -> TextBlock | DataBlock:
    """A block a provider will accept: text without lone surrogates, standard base64."""
    if isinstance(block, TextBlock):
        text = _without_surrogates(block.text)
        return block if text is block.text else block.model_copy(update={"text": text})
    source = block.source
    if not isinstance(source, Base64Source):
        return block
    try:
        base64.b64decode(source.data, validate=True)
        return block
    except (binascii.Error, ValueError):
        pass
    # URL-safe, unpadded or wrapped: providers want the standard spelling. Not base64 at
    # all: InvalidContent, so the model gets an error result instead of every later call
    # failing on it.
    raw = decode_base64(source.data, what="the DataBlock the tool returned")
    standard = source.model_copy(update={"data": base64.b64encode(raw).decode("ascii")})
    return block.model_copy(update={"source": standard})


def _as_output(value: Any) -> str | list[TextBlock | DataBlock]:
    """A tool's return value as a tool result's output.

    Raises:
        InvalidContent: the value has no text form the model can be shown: nested deeper
            than `MAX_DEPTH` levels (or containing itself), an int too long to print, or an
            object whose `__str__` raises.
    """
    if isinstance(value, str):
        return _without_surrogates(value)
    if isinstance(value, bytes):
        return _decoded(value)
    if isinstance(value, (TextBlock, DataBlock)):
        return [_checked_block(value)]
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, (TextBlock, DataBlock)) for v in value)
    ):
        return [_checked_block(v) for v in value]
    if value is None:
        return ""
    # json.dumps and str() recurse and would raise RecursionError out of the agent.
    if too_deep(value, MAX_DEPTH):
        raise InvalidContent(
            f"it is nested deeper than {MAX_DEPTH} levels (or contains itself): return "
            "flatter data, or JSON text"
        )
    try:
        return _without_surrogates(json.dumps(value, ensure_ascii=False, indent=2, default=str))
    except (TypeError, ValueError):
        pass  # keys json cannot take, an int over the digit limit, a circular reference
    except Exception as exc:  # default=str ran a __str__ that raised
        raise InvalidContent(f"{type(exc).__name__}: {exc}") from None
    try:
        return _without_surrogates(str(value))
    except Exception as exc:
        raise InvalidContent(f"{type(exc).__name__}: {exc}") from None


def as_tool(func: Callable[..., Any] | Tool) -> Tool:
    """Describe a function as a `Tool`, its schema taken from type hints and docstring.

    The docstring's text before its first section becomes the description, and its
    Google-style `Args:` section describes each parameter; a parameter with a default is
    optional.

    Args:
        func: a named function, sync or async; a `Tool` is returned unchanged.

    Returns:
        The tool, with its JSON schema.

    Raises:
        TypeError: the function takes `*args` or positional-only parameters, which a model
            cannot pass by name.
    """
    if isinstance(func, Tool):
        return func
    name = getattr(func, "__name__", None)
    if not name or not callable(func):
        raise TypeError(f"a tool must be a named function, got {func!r}")
    description, arg_docs = parse_docstring(inspect.getdoc(func))
    hints = _hints(func)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for pname, param in inspect.signature(func).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(
                f"tool {name} has parameter {pname!r} of kind {param.kind.description}: a "
                "model passes arguments by name, so use ordinary named parameters"
            )
        hint = hints.get(pname, Any)
        schema = TypeAdapter(hint).json_schema() if hint is not Any else {}
        schema.pop("title", None)
        if pname in arg_docs:
            schema["description"] = arg_docs[pname]
        if param.default is inspect.Parameter.empty:
            required.append(pname)
        else:
            try:
                json.dumps(param.default)
                schema["default"] = param.default
            except (TypeError, ValueError):
                pass
        properties[pname] = schema
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return Tool(name=name, description=description or name, parameters=parameters, func=func)


def as_tools(funcs: Sequence[Callable[..., Any] | Tool]) -> dict[str, Tool]:
    """Tools by name; two tools with one name are an error."""
    tools: dict[str, Tool] = {}
    for func in funcs:
        tool = as_tool(func)
        if tool.name in tools:
            raise ValueError(f"two tools are named {tool.name!r}: tool names must be unique")
        tools[tool.name] = tool
    return tools
