"""The contract's driver for Strands' `ContextOffloader` storing through `WorkspaceStorage`
(door "strands-storage"); it lives beside the manager's in `contract_strands.py`."""

from __future__ import annotations

from contract_strands import STORAGE as DRIVER

__all__ = ["DRIVER"]
