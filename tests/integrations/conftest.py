"""The integration tests stand on the loopback servers of two other test folders: the S3 API
of tests/workspace (`s3_server`) and the scripted OpenAI server of tests/agent
(`openai_server`). Their folders go on the import path here, once."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1]
for _folder in ("workspace", "agent"):
    if str(_TESTS / _folder) not in sys.path:
        sys.path.insert(0, str(_TESTS / _folder))
