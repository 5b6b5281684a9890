"""The gate: which tool calls run now and which wait for a human, and what the reviewer is shown.

It reads the agent's approval config (``requireApproval``, ``exempt``, rules, precedence), judges the
calls of one model response, stores the calls that wait as a batch behind a pause, binds an approval to
the request it showed (pinning), checks a reviewer's decision and amendments, and keeps the execution
journal that runs an approved call at most once. It imports outbound HTTP, never the runtime.

Other apps import these names from here, never from a module of this package.
"""

from toolgate.gate.approval_config import tool_approvals_warnings, validate_tool_approvals
from toolgate.gate.batches import PendingBatch, store_batch
from toolgate.gate.pause_details import tool_pause_details
from toolgate.gate.pinning import pinning_key
from toolgate.gate.precedence import UNDETERMINED, effective_tool_approvals
from toolgate.gate.tools import ToolContext

__all__ = [
    "UNDETERMINED",
    "PendingBatch",
    "ToolContext",
    "effective_tool_approvals",
    "pinning_key",
    "store_batch",
    "tool_approvals_warnings",
    "tool_pause_details",
    "validate_tool_approvals",
]
