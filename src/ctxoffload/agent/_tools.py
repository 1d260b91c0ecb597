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
            return ToolResultBlock(
                id=call.id,
                name=self.name,
                output=f"Error: {type(exc).__name__}: {exc}",
                is_error=True,
            )
        return ToolResultBlock(id=call.id, name=self.name, output=_as_output(value))

    def _arguments(self, raw: dict[str, Any]) -> dict[str, Any]:
        if "_raw_arguments" in raw:
            raise ValueError(
                f"the arguments for {self.name} were not valid JSON: {raw['_raw_arguments']!r}"
            )
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


def _as_output(value: Any) -> str | list[TextBlock | DataBlock]:
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
    try:
        return json.dumps(value, ensure_ascii=False, indent=2, default=str)
    except (TypeError, ValueError):
        return str(value)


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
