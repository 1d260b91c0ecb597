"""The shapes providers give their own compaction, for the tests beside it.

Not captured from a live API (the tests run offline): each is written field for field from
the provider's documentation and its SDK's generated types, named above it; the summary texts,
ids and encrypted blobs are made up.
"""

from __future__ import annotations

import copy
from typing import Any

# -- Anthropic: server-side compaction ------------------------------------------------------
# https://platform.claude.com/docs/en/build-with-claude/compaction
# Enabled with the `context_management.edits` strategy `compact_20260112` and the beta header
# `compact-2026-01-12`. The response holds a `compaction` content block (its summary in
# `content`, null when the compaction failed), before the rest of the assistant turn; the
# next request sends the assistant message back as it came, and the API drops every block
# before the compaction block. Field by field from the SDK's types:
# https://github.com/anthropics/anthropic-sdk-python/blob/main/src/anthropic/types/beta/beta_compaction_block.py
# https://github.com/anthropics/anthropic-sdk-python/blob/main/src/anthropic/types/beta/beta_compaction_block_param.py
# https://github.com/anthropics/anthropic-sdk-python/blob/main/src/anthropic/types/beta/beta_compact_20260112_edit_param.py

ANTHROPIC_BETA_HEADER = {"anthropic-beta": "compact-2026-01-12"}
ANTHROPIC_CONTEXT_MANAGEMENT = {
    "edits": [
        {
            "type": "compact_20260112",
            "trigger": {"type": "input_tokens", "value": 50_000},
            "pause_after_compaction": False,
        }
    ]
}

ANTHROPIC_COMPACTION_BLOCK: dict[str, Any] = {
    "type": "compaction",
    "content": (
        "## Summary\nThe user asked why the nightly export fails. The agent ran the export "
        "script and read its log; the failure is a missing column in the orders table.\n"
        "## Next steps\nPropose a migration."
    ),
}

ANTHROPIC_RESPONSE: dict[str, Any] = {
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-6",
    "content": [
        ANTHROPIC_COMPACTION_BLOCK,
        {"type": "text", "text": "The export fails on a missing column; here is a migration."},
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 51_234, "output_tokens": 412},
}

# The same turn calling a tool after its compaction block (stop_reason `tool_use`).
ANTHROPIC_TOOL_RESPONSE: dict[str, Any] = {
    **ANTHROPIC_RESPONSE,
    "content": [
        ANTHROPIC_COMPACTION_BLOCK,
        {
            "type": "tool_use",
            "id": "toolu_01A09q90qw90lq917835lq9",
            "name": "bash",
            "input": {"command": "psql -c '\\d orders'"},
        },
    ],
    "stop_reason": "tool_use",
}


def anthropic_message(response: dict[str, Any]) -> dict[str, Any]:
    """The assistant message a client appends to its history for `response` (what the next
    request sends back): its role and content, as they came."""
    return {"role": response["role"], "content": copy.deepcopy(response["content"])}


# -- OpenAI: Responses-API compaction -------------------------------------------------------
# https://developers.openai.com/api/docs/guides/compaction
# Server-side: `context_management=[{"type": "compaction", "compact_threshold": N}]` on
# `POST /responses`; the output holds an encrypted `compaction` item, before the model's
# reply. Chaining statelessly, the output items are appended to the input as usual; the
# items before the newest compaction item may be dropped. Field by field from the SDK's types:
# https://github.com/openai/openai-python/blob/main/src/openai/types/responses/response_compaction_item.py
# https://github.com/openai/openai-python/blob/main/src/openai/types/responses/compacted_response.py

OPENAI_CONTEXT_MANAGEMENT = [{"type": "compaction", "compact_threshold": 200_000}]

OPENAI_COMPACTION_ITEM: dict[str, Any] = {
    "id": "cmp_68c9d4bd5a408190a4bd4c0a0f3a2e7d",
    "type": "compaction",
    "encrypted_content": "gAAAAABoydS9x1P0mQ3n8sZpVv4eR2cT0h1W7dYq9lXkJbN6oU5rA8fGzHiEwL3tM==",
    "created_by": "system",
}

OPENAI_RESPONSE: dict[str, Any] = {
    "id": "resp_68c9d4bd4a1c8190b7e2d3f4a5b6c7d8",
    "object": "response",
    "created_at": 1_758_057_661,
    "status": "completed",
    "model": "gpt-5",
    "output": [
        OPENAI_COMPACTION_ITEM,
        {
            "id": "msg_68c9d4c01d348190a1b2c3d4e5f6a7b8",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [
                {
                    "type": "output_text",
                    "text": "The export fails on a missing column; here is a migration.",
                    "annotations": [],
                }
            ],
        },
    ],
    "usage": {"input_tokens": 201_877, "output_tokens": 388, "total_tokens": 202_265},
}

# `POST /responses/compact`: "a list of all user messages, followed by a single compaction
# item" (CompactedResponse.output), which replaces the whole input of the next request.
OPENAI_COMPACTED_RESPONSE: dict[str, Any] = {
    "id": "resp_compact_68c9d4bd",
    "object": "response.compaction",
    "created_at": 1_758_057_700,
    "output": [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Why does the nightly export fail?"}],
        },
        OPENAI_COMPACTION_ITEM,
    ],
    "usage": {"input_tokens": 15_000, "output_tokens": 1_200, "total_tokens": 16_200},
}
