"""Every door of ctxoffload, declared once: what `show`, `compact`, the busy refusal and the
conformance suite say of it.

A door's texts are in the host's own words: a LangChain user reads "thread_id", an MCP user
"--session". The record's `door` event copies what a reader needs (host, adapter, whether it
projects, what it records), so an older or newer release's sessions read without this table.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["DOORS", "Door", "door_named"]


class Door:
    """One door: a host and the adapter that reaches ctxoffload from it.

    Attributes:
        name: the door's name in the record (the `door` event, the lease's agent).
        host: the host as its users call it ("LangChain").
        adapter: the class or command a user puts in the host.
        conversation: what names a conversation of the host, said as its users would.
        projects: whether ctxoffload decides what the host's model is sent (a projection or
            a history it edits), so `ctxoffload compact` can serve a request for it.
        records: what the door records, the end of "it records ...".
        steps: whether the door records each model call it sees, so `ctxoffload show
            --step N` rebuilds what the model was sent (default: `projects`).
        busy: what to do when a second run of one conversation is refused, in the host's
            terms (empty for a door whose host keeps one writer itself).
        compact: what to do instead of `ctxoffload compact` (a door that does not project).
        leases: whether the door holds the session's lease for a run (see `one_writer`).
        one_writer: how the door keeps one writer per conversation, or why it needs none.
        plugged_in: for a door whose read-back tools are given to the host apart from its
            hooks, the step that plugs the hooks in, said when its tools reach a run they
            are not in (`unplugged.LeftOut`).
        summaries: the class of the door that takes `summary_model`, where ctxoffload writes
            the door's summaries (by one rule, `summaries.SummaryWriter`: DESIGN §18); empty
            where the host summarises with its own model, or nothing is summarised.
    """

    __slots__ = (
        "adapter",
        "busy",
        "compact",
        "conversation",
        "host",
        "leases",
        "name",
        "one_writer",
        "plugged_in",
        "projects",
        "records",
        "steps",
        "summaries",
    )

    def __init__(
        self,
        name: str,
        *,
        host: str,
        adapter: str,
        conversation: str,
        projects: bool,
        records: str,
        busy: str = "",
        compact: str = "",
        leases: bool = True,
        one_writer: str = "",
        plugged_in: str = "",
        steps: bool | None = None,
        summaries: str = "",
    ) -> None:
        self.name = name
        self.host = host
        self.adapter = adapter
        self.conversation = conversation
        self.projects = projects
        self.records = records
        self.steps = projects if steps is None else steps
        self.busy = busy
        self.compact = compact
        self.leases = leases
        self.plugged_in = plugged_in
        self.summaries = summaries
        self.one_writer = one_writer or (
            f"a run holds the session's lease; a second live run of one conversation is "
            f"refused: {busy}"
        )

    def __repr__(self) -> str:
        return f"Door({self.name!r})"


_PROJECTED = "what each model call was sent, and the results it stored"

DOORS: Mapping[str, Door] = {
    door.name: door
    for door in (
        Door(
            "agent",
            host="ctxoffload's Agent",
            adapter="Agent",
            conversation="its session_id (a new one when none is given)",
            projects=True,
            records="everything: its start, each model call and what it was sent, each tool "
            "call, every offload and compaction (its `session_start` opens the record)",
            busy="wait for it to stop, pass another session_id, or pass Agent(..., "
            "if_busy='fork') to continue in a fork of its saved state",
            summaries="Agent",
        ),
        Door(
            "langchain",
            host="LangChain",
            adapter="ContextOffloadMiddleware",
            conversation="the run's thread_id (config={'configurable': {'thread_id': ...}})",
            projects=True,
            records=_PROJECTED,
            busy="wait for the other invoke of this thread to end, or give this one another "
            "thread_id",
            summaries="ContextOffloadMiddleware",
        ),
        Door(
            "deepagents",
            host="deepagents",
            adapter="WorkspaceBackend",
            conversation="the LangGraph run's thread_id",
            projects=False,
            records="the files deepagents evicts, each version; no model call",
            compact="deepagents summarises its own history; add ContextOffloadMiddleware to "
            "the agent's middleware for ctxoffload to compact it",
            leases=False,
            one_writer="the backend sees file calls, not runs: versions are appended, never "
            "overwritten, so two runs cannot undo each other; ContextOffloadMiddleware beside "
            "it holds the thread's lease",
        ),
        Door(
            "pydantic-ai",
            host="pydantic-ai",
            adapter="ContextOffload",
            conversation="the run's conversation_id (agent.run(..., conversation_id=...))",
            projects=True,
            records=_PROJECTED,
            busy="wait for the other run of this conversation to end, or give this run "
            "another conversation_id",
            summaries="ContextOffload",
        ),
        Door(
            "openai-agents",
            host="the OpenAI Agents SDK",
            adapter="OffloadingInputFilter",
            conversation="the WorkspaceSession that made the filter (session.input_filter()), "
            "or the filter's session_id; else a new session per Runner.run",
            projects=True,
            records=_PROJECTED,
            busy="wait for the other Runner.run of this session to end, or run this one with "
            "another session",
            plugged_in="give each run the filter: Runner.run(..., run_config="
            "RunConfig(call_model_input_filter=offload))",
            summaries="OffloadingInputFilter",
        ),
        Door(
            "google-adk",
            host="Google ADK",
            adapter="ContextOffloadPlugin",
            conversation="the ADK session's id (runner.run_async(..., session_id=...))",
            projects=True,
            records=_PROJECTED,
            busy="wait for the other run of this ADK session to end, or run this one in "
            "another session (session_service.create_session(...))",
            plugged_in="give the runner the plugin itself: App(..., plugins=[offload]) or "
            "Runner(..., plugins=[offload])",
            summaries="ContextOffloadPlugin",
        ),
        Door(
            "llama-index",
            host="LlamaIndex",
            adapter="OffloadingMemory",
            conversation="the memory's session_id (OffloadingMemory.from_defaults(workspace, "
            "session_id=...))",
            projects=True,
            records="what the memory gave the agent at each read (`ctxoffload show SESSION "
            "--step N` rebuilds it) and the tool results it stored; not the model calls (the "
            "agent adds this run's own steps to what it reads)",
            busy="close the other memory of this session (await memory.aclose()), or give "
            "this one another session_id",
            one_writer="a memory holds its session's lease from its first use to aclose() "
            "(or until it is dropped); a second memory of the same session meanwhile is "
            "refused: close the other memory of this session (await memory.aclose()), or "
            "give this one another session_id",
            summaries="OffloadingMemory",
        ),
        Door(
            "crewai",
            host="CrewAI",
            adapter="ContextOffloadHooks",
            conversation="the run (each crew.kickoff or agent.kickoff gets a session of its "
            "own), or the hooks' session_id",
            projects=True,
            records=_PROJECTED,
            busy="wait for the other kickoff of this session to end, or build these "
            "ContextOffloadHooks with another session_id (or none: each kickoff then gets a "
            "session of its own)",
            plugged_in="kick off inside `with offload:`, or call offload.register() before",
            summaries="ContextOffloadHooks",
        ),
        Door(
            "strands",
            host="Strands",
            adapter="OffloadingConversationManager",
            conversation="the agent's session (its session manager's session_id), else one "
            "new session per manager",
            projects=True,
            records="the messages it moved out and its summaries; no model call",
            steps=False,
            busy="wait for the other agent of this session to stop, or give this manager "
            "another session_id; one manager serves one agent at a time: give each agent its "
            "own OffloadingConversationManager",
            summaries="OffloadingConversationManager",
        ),
        Door(
            "strands-storage",
            host="Strands",
            adapter="WorkspaceStorage",
            conversation="the storage's session_id, else one new session per storage",
            projects=False,
            records="the blocks Strands' offloader stored through it",
            compact="Strands' own conversation manager owns that context; use "
            "OffloadingConversationManager for ctxoffload to compact it",
            leases=False,
            one_writer="a storage sees single writes, not runs: each block is stored whole "
            "under a new name and never overwritten",
        ),
        Door(
            "agentscope",
            host="AgentScope",
            adapter="AgentScopeOffloader",
            conversation="the agent's state.session_id",
            projects=False,
            records="the results, context and data blocks AgentScope offloaded",
            busy="wait for the other reply of this agent's session to end, or give the agent "
            "another session_id",
            compact="AgentScope compresses its own memory; it stores what leaves here",
        ),
        Door(
            "claude-code",
            host="Claude Code",
            adapter="ctxoffload hook",
            conversation="Claude Code's session_id",
            projects=False,
            records="big outputs, each compaction's transcript; no model call",
            compact="Claude Code owns its context: run /compact there (the PreCompact hook "
            "keeps what it drops)",
            leases=False,
            one_writer="Claude Code runs one process per session; its hooks are short "
            "processes, some at once for parallel tools, whose writes are appends that never "
            "overwrite",
        ),
        Door(
            "claude-agent-sdk",
            host="the Claude Agent SDK",
            adapter="OffloadingHooks",
            conversation="the SDK's session_id",
            projects=False,
            records="big outputs, each compaction's transcript; no model call",
            compact="the SDK's Claude Code owns its context: it compacts itself (the "
            "PreCompact hook keeps what it drops)",
            leases=False,
            one_writer="the SDK's Claude Code process is the one writer of its session; the "
            "hooks' writes are appends that never overwrite",
        ),
        Door(
            "smolagents",
            host="smolagents",
            adapter="OffloadingStepCallbacks",
            conversation="the run (each agent.run gets a session of its own; a run with "
            "reset=False goes on in the session of the run before it), or the callbacks' "
            "session_id",
            projects=True,
            records="what each model call was sent (rebuilt from the agent's memory at each "
            "step), the observations it stored and the steps it summarised; the agent's "
            "memory keeps head + notice and a summary step",
            busy="wait for the other run of this session to end, or build this agent's "
            "OffloadingStepCallbacks with another session_id (or none: each run then gets a "
            "session of its own)",
            summaries="OffloadingStepCallbacks",
        ),
        Door(
            "haystack",
            host="Haystack",
            adapter="WorkspaceResultStore",
            conversation="the store's session_id, else a new session per store (give each "
            "run a store of its own through hook_context, as Haystack advises)",
            projects=False,
            records="the tool results Haystack's ToolResultOffloadHook and "
            "ToolResultOffloadCompactor stored through it and, with WorkspaceCompactor, "
            "the messages each compaction took out; not the model calls (the Agent makes "
            "them)",
            compact="Haystack's CompactionHook decides when its Agent compacts; give it "
            "WorkspaceCompactor(store) so that what leaves is kept in context.jsonl",
            leases=False,
            one_writer="a store sees single writes, not runs: each result is stored whole "
            "under a new name and never overwritten",
            summaries="WorkspaceCompactor",
        ),
        Door(
            "mcp-proxy",
            host="an MCP client",
            adapter="ctxoffload mcp-proxy",
            conversation="one client connection (a new session each, or --session)",
            projects=False,
            records="each tool call and its big result; no model call",
            busy="leave --session out (each connection then gets a session of its own), or "
            "stop the proxy that holds it",
            compact="the MCP client owns its context: compact it there",
        ),
    )
}
"""Every door, by name. The Agent's record opens with its `session_start`, not a `door`
event: it says more (config, models, tools)."""


def door_named(name: object) -> Door | None:
    """The door of that name, or None (a name from a record another release wrote)."""
    return DOORS.get(name) if isinstance(name, str) else None
