"""`ctxoffload eval` asks a Strands `Model` through the Strands door's adapter: the reader
served on 127.0.0.1, asked once as ctxoffload's `OpenAIChatModel` and once as Strands' own
`OpenAIModel` (Converse messages, its tool specs, its streamed tool uses), answers and reads
alike, probe by probe."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import pytest
from frameworks import require_framework

require_framework("strands", "strands")

from host_eval import asked_alike  # noqa: E402
from strands.models.openai import OpenAIModel  # noqa: E402


# The host's OpenAI client may leave a socket for the collector (its pool, not ctxoffload's):
# `asked_alike` collects it inside this test, rather than failing whichever test runs next.
@pytest.mark.filterwarnings(
    "ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)
def test_a_strands_model_is_asked_as_the_same_model_over_http(tmp_path: Path) -> None:
    asked_alike(
        tmp_path,
        lambda url: nullcontext(
            OpenAIModel(client_args={"base_url": url, "api_key": "test"}, model_id="reader")
        ),
    )
