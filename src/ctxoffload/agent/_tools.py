"""Plain Python functions as agent tools: a JSON schema from type hints and the docstring."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, get_type_hints

from pydantic import TypeAdapter, ValidationError

from .._depth import MAX_DEPTH, too_deep
from ..exceptions import InvalidContent
from ..messages import DataBlock, TextBlock, ToolCallBlock, ToolResultBlock

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

    async def run(self, call: ToolCallBlock) -> ToolResultBlock:
        """Run the function for one call; failures become error results, never exceptions."""
        try:
            kwargs = self._arguments(call.input)
            if inspect.iscoroutinefunction(self.func):
                value = await self.func(**kwargs)
            else:
                value = await asyncio.to_thread(self.func, **kwargs)
                if inspect.isawaitable(value):
                    value = await value
        except Exception as exc:
            return _error(call, self.name, f"{type(exc).__name__}: {exc}")
        try:
            output = _as_output(value)
        except InvalidContent as exc:
            return _error(
                call,
                self.name,
                f"{self.name} returned a value that cannot be shown to the model: {exc}",
            )
        return ToolResultBlock(id=call.id, name=self.name, output=output)

    def _arguments(self, raw: dict[str, Any]) -> dict[str, Any]:
        if "_raw_arguments" in raw:
            text = raw["_raw_arguments"]
            shown = repr(text) if len(str(text)) <= 200 else repr(str(text)[:200]) + "..."
            if _too_deep_json(text):
                raise ValueError(
                    f"the arguments for {self.name} are nested deeper than {MAX_DEPTH} levels "
                    f"({shown}): pass flatter arguments"
                )
            raise ValueError(f"the arguments for {self.name} were not a valid JSON object: {shown}")
        signature = inspect.signature(self.func)
        hints = _hints(self.func)
        unknown = sorted(set(raw) - set(signature.parameters))
        if unknown:
            raise TypeError(
                f"{self.name} got unknown arguments {unknown}; it takes "
                f"{sorted(signature.parameters)}"
            )
        kwargs: dict[str, Any] = {}
        for name, param in signature.parameters.items():
            if name not in raw:
                if param.default is inspect.Parameter.empty:
                    raise TypeError(f"{self.name} is missing the required argument {name!r}")
                continue
            hint = hints.get(name, Any)
            try:
                kwargs[name] = TypeAdapter(hint).validate_python(raw[name])
            except ValidationError as exc:
                raise TypeError(f"argument {name!r} of {self.name}: {exc}") from None
        return kwargs


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
        value = json.loads(text)
    except RecursionError:
        return True  # json.loads recurses: well-formed as far as it got, only too deep
    except ValueError:
        return False
    return too_deep(value, MAX_DEPTH)


def _as_output(value: Any) -> str | list[TextBlock | DataBlock]:
    """A tool's return value as a tool result's output.

    Raises:
        InvalidContent: the value has no text form the model can be shown: nested deeper
            than `MAX_DEPTH` levels (or containing itself), an int too long to print, or an
            object whose `__str__` raises.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        # surrogateescape keeps non-UTF-8 bytes; the workspace writes them back unchanged.
        return value.decode("utf-8", "surrogateescape")
    if isinstance(value, (TextBlock, DataBlock)):
        return [value]
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, (TextBlock, DataBlock)) for v in value)
    ):
        return list(value)
    if value is None:
        return ""
    # json.dumps and str() recurse and would raise RecursionError out of the agent.
    if too_deep(value, MAX_DEPTH):
        raise InvalidContent(
            f"it is nested deeper than {MAX_DEPTH} levels (or contains itself): return "
            "flatter data, or JSON text"
        )
    try:
        return json.dumps(value, ensure_ascii=False, indent=2, default=str)
    except (TypeError, ValueError):
        pass  # keys json cannot take, an int over the digit limit, a circular reference
    except Exception as exc:  # default=str ran a __str__ that raised
        raise InvalidContent(f"{type(exc).__name__}: {exc}") from None
    try:
        return str(value)
    except Exception as exc:
        raise InvalidContent(f"{type(exc).__name__}: {exc}") from None


def as_tool(func: Callable[..., Any] | Tool) -> Tool:
    """Describe a function as a `Tool`, its schema taken from type hints and docstring.

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
