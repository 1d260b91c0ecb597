"""The door core: the promises every door keeps, written once (DESIGN.md section 17).

A door is how a host reaches ctxoffload: LangChain's middleware, the deepagents backend,
pydantic-ai's capability, the OpenAI Agents SDK's filter and session, Strands' manager and
storage, AgentScope's offloader, the Claude Code hooks and the Claude Agent SDK's callbacks,
the MCP proxy. Each adapter calls this package for what is the same at every door:

- `doors.py`: each door declared once: its host, what names its conversations, whether
  ctxoffload decides what the host's model is sent, what it records, and its advice (in the
  host's own terms) when a conversation is busy or cannot be compacted from outside;
- `identity.py`: a conversation's session, by the one mapping rule (`session_id_for`);
  never a shared default;
- `checks.py`: what a door is given, refused at construction with one `ConfigError` naming
  the fix (a path where a workspace belongs, a workdir that is a file, ...);
- `answers.py`: a tool whose output the host hands back as the run's answer stays whole at
  the tool (`answers_run`);
- `unplugged.py`: a door whose read-back tools reach a run its hooks are not in says so, once
  (`LeftOut`), naming the step that plugs it in;
- `runs.py`: one live run per conversation (the session's lease, refused in the door's
  terms) and the `door` event that opens each run in the record.
- `claude_hooks.py`: the work of Claude Code's hooks, one door with two fronts: the
  `ctxoffload hook` command (a fresh process on every tool call, so it starts light) and the
  Claude Agent SDK's callbacks (`integrations/claude.py`). Both import it here, as the command
  may reach no private module of `integrations`.

Private like `_disk/`: every door imports these modules directly; nothing re-exports them.
"""
