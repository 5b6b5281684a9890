"""Binding an approval to the request that will run (http tools).

A call is pinned when a fingerprint of its resolved request was stored at gate time. Before an approved
pinned call runs, the request is resolved again and compared; anything that cannot be verified refuses
the call (fail closed). An unpinned call is approved on name and arguments alone: nothing is refused on
a comparison that was never sound. An amended call is not checked: the reviewer wrote it.
"""

from __future__ import annotations

from toolgate.models import PendingToolCall
from toolgate.tools import ToolContext, ToolSet

CANNOT_VERIFY = "the request could not be re-resolved before execution"


def request_changed_reason(call: PendingToolCall, amended: str | None, toolset: ToolSet,
                           context: ToolContext) -> str | None:
    """None to proceed; otherwise why the approved call must not run."""
    if not call.request_fingerprint or amended is not None:
        return None
    return CANNOT_VERIFY
