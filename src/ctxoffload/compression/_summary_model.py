"""`Summary`: the five fields a summary model writes when older history is compressed."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SUMMARY_FIELDS", "Summary"]


class Summary(BaseModel):
    """A structured summary of compressed history, written for the agent that continues.

    Its JSON schema (`Summary.model_json_schema()`) is the default
    `ContextConfig.summary_schema`: every field is required and no other key is allowed,
    so it also works as an OpenAI strict structured-output schema. Parsing is lenient:
    unknown keys in a model's reply are ignored rather than failing the summary.

    Args:
        task_overview: what the user asked for and why, with every constraint they stated.
        current_state: what has been done and where things stand: files changed, commands
            run and their outcome, what works and what still fails.
        important_discoveries: facts costly to rediscover: root causes, exact errors, paths
            and line numbers, ids, approaches that failed and why.
        next_steps: the next actions, in order, including an interrupted tool call or a
            question waiting for the user.
        context_to_preserve: anything else to keep verbatim: names, identifiers, URLs,
            configuration values, the user's words, paths of offloaded files.
    """

    # The schema is sent to the summary model, so its description speaks to that model rather
    # than repeating this docstring.
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={
            "description": (
                "A summary of the earlier part of a conversation, written for the agent that "
                "continues the task with only this summary and the recent messages."
            ),
            "additionalProperties": False,
        },
    )

    task_overview: str = Field(
        description=(
            "What the user asked for and why, in their own terms, including every constraint "
            "and preference they stated (versions, style, what not to touch)."
        )
    )
    current_state: str = Field(
        description=(
            "What has been done so far and where things stand now: files changed, commands "
            "run and their outcome, what works and what still fails."
        )
    )
    important_discoveries: str = Field(
        description=(
            "Facts learned that are costly to rediscover: root causes, exact error messages, "
            "file paths and line numbers, ids, numbers, approaches that did not work and why."
        )
    )
    next_steps: str = Field(
        description=(
            "The concrete next actions, in order, including any tool call that was "
            "interrupted or any question still waiting for the user."
        )
    )
    context_to_preserve: str = Field(
        description=(
            "Anything else the agent must keep verbatim: names, identifiers, URLs, "
            "configuration values, quotes from the user, and paths of offloaded files."
        )
    )


SUMMARY_FIELDS: tuple[str, ...] = tuple(Summary.model_fields)
"""The five field names, in order; each may appear in a summary template as `{name}`."""
