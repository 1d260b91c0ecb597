"""A tool whose output is the run's answer stays whole where the door meets the tool.

Several hosts end a run with a tool's output, handing it back to the program as the run's
answer: LangChain's (and deepagents') `return_direct` tools, CrewAI's `result_as_answer`,
LlamaIndex's `return_direct` (in the tool's metadata), a Google ADK tool that sets
`skip_summarization` on its context's actions. A door that cut such an output at the tool, as
it cuts any big result, would hand the program its head and a notice for an answer (and, for
CrewAI, the next task too).

So the doors ask `answers_run` before cutting a result and leave such an output whole: the
program gets it as the tool returned it. Nothing leaves the context unstored either way: if a
later request sends it to the model (the conversation goes on), the request is cut there, the
output stored whole first, as any big result the door did not cut at the tool.
"""

from __future__ import annotations

__all__ = ["answers_run"]


def answers_run(tool: object, context: object = None) -> bool:
    """Whether the host hands `tool`'s output back as its run's answer: a `return_direct` or
    `result_as_answer` tool, one whose `metadata` says `return_direct`, or (`context`, the
    call's tool context) one whose call set `skip_summarization` on its actions."""
    if _flag(tool, "return_direct") or _flag(tool, "result_as_answer"):
        return True
    if _flag(getattr(tool, "metadata", None), "return_direct"):
        return True
    return _flag(getattr(context, "actions", None), "skip_summarization")


def _flag(owner: object, name: str) -> bool:
    """`owner.name` when it is True itself (a mock's or a proxy's attribute is not)."""
    return owner is not None and getattr(owner, name, False) is True
