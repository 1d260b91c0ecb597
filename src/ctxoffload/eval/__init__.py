"""`ctxoffload eval`: what a model still knows after each compaction of a session, asked of
the user's own model the way the agent met it, with and without one read.

`evaluate(workdir, session, model)` builds probes from the session's record (questions whose
answers left the context at a compaction and are not in what the model was sent right after
it), asks them, grades them and returns a report; with no model it calls nothing and returns
the plan, every probe in the report's `not_asked`.
"""

from .._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._evaluate import evaluate

__all__ = ["evaluate"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), {"evaluate": "._evaluate"})
