"""Tool schemas from type hints and docstrings."""

from __future__ import annotations

from typing import Literal

import pytest

from ctxoffload.agent import as_tool
from ctxoffload.agent._tools import as_tools, parse_docstring


def search(query: str, limit: int = 10, mode: Literal["fast", "exact"] = "fast") -> str:
    """Search the index.

    Longer explanation here.

    Args:
        query: what to look for; may span
            two lines.
        limit: most results.
        mode: how to match.

    Returns:
        The hits.
    """
    return query


def test_schema_comes_from_hints_and_docstring() -> None:
    tool = as_tool(search)
    assert tool.name == "search"
    assert tool.description == "Search the index.\n\nLonger explanation here."
    params = tool.parameters
    assert params["required"] == ["query"]
    assert params["properties"]["query"] == {
        "type": "string",
        "description": "what to look for; may span two lines.",
    }
    assert params["properties"]["limit"]["type"] == "integer"
    assert params["properties"]["limit"]["default"] == 10
    assert params["properties"]["mode"]["enum"] == ["fast", "exact"]
    assert tool.schema["type"] == "function"


def test_docstring_without_sections() -> None:
    assert parse_docstring("Just a line.") == ("Just a line.", {})
    assert parse_docstring(None) == ("", {})


def test_var_args_are_refused() -> None:
    def bad(*items: str) -> str:
        """Bad."""
        return ""

    with pytest.raises(TypeError, match="by name"):
        as_tool(bad)


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match="unique"):
        as_tools([search, search])
