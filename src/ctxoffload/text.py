"""The text of a message, and of the `<data .../>` line that stands for a binary payload.

One home for every audience that shows or matches a message as text: the agent's Grep and
Read, the retrieval tool, the `ctxoffload` commands, the summariser's transcript and the token
counter. Light on purpose (no pydantic): the CLI imports it at start-up.
"""

from __future__ import annotations

from html import escape

__all__ = ["data_line"]


def data_line(url: str, name: str | None, media_type: str | None) -> str:
    """The one line that stands for a binary payload: in a tool_result file, a preview, a
    message converted to a format that takes no URL for it, and what is counted for it.

    Attribute values are HTML-escaped (a quote in a file name cannot end the attribute); an
    attribute without a value is left out.
    """
    attrs = [f"url='{escape(url, quote=True)}'"]
    if name:
        attrs.append(f"name='{escape(name, quote=True)}'")
    if media_type:
        attrs.append(f"media_type='{escape(media_type, quote=True)}'")
    return f"<data {' '.join(attrs)}/>"
