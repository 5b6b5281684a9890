"""The LLM runtime: the tool loop of one ``llm`` task, and picking it up again after a decision.

It asks the model (``providers``), offers it the tools of its sources (``sources``), passes each
response through the gate, runs what may run, pauses on the rest, resumes after the human decides, and
stops a loop that makes no progress. It also journals the steps of declared HTTP calls so that a
continuation never sends one twice. It imports the gate and outbound HTTP; neither imports it.

Other apps import these names from here, never from a module of this package.
"""

from toolgate.runtime.loop import LoopSettings, LoopState, run_tool_loop
from toolgate.runtime.no_progress import (
    GuardTrip,
    act_on_trip,
    check_guard,
    record_trip,
    wait_for_human_timeout,
)
from toolgate.runtime.providers import chat_model_for
from toolgate.runtime.sources import BUILTIN_TOOL_NAMES, TOOLS_KEYS, toolset_for
from toolgate.runtime.step_journal import Continuing, journaled
from toolgate.runtime.tool_continuation import CONFIG_DRIFT_TEXT, resume_state

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "CONFIG_DRIFT_TEXT",
    "TOOLS_KEYS",
    "Continuing",
    "GuardTrip",
    "LoopSettings",
    "LoopState",
    "act_on_trip",
    "chat_model_for",
    "check_guard",
    "journaled",
    "record_trip",
    "resume_state",
    "run_tool_loop",
    "toolset_for",
    "wait_for_human_timeout",
]
