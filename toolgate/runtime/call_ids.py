"""The ids of one model response's tool calls, made safe to store and to answer one by one.

A call id comes from the model, so it is untrusted input: it may be missing, too long for the
database, repeated inside one response, or shaped like a key the execution journal uses for its own
steps. None of that may fail the turn or let one call borrow another's identity.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from toolgate.gate.tools import ToolCall
from toolgate.models import JournalEntry, PendingToolCall
from toolgate.runtime.providers.turn import generated_call_id

CALL_ID_MAX_CHARS = min(
    PendingToolCall._meta.get_field("call_id").max_length or 0,
    JournalEntry._meta.get_field("call_id").max_length or 0,
)
# The execution journal keys an http step of a continuation ``http:<task id>:<call name>``
# (toolgate.runtime.step_journal.step_key) in the same (pause epoch, call id) space as the tool calls.
JOURNAL_STEP_PREFIX = "http:"


@dataclass
class ResponseCalls:
    """The calls of one model response with their final ids, in the order the model gave them.

    ``refused`` maps the new id of each call that reused an id of the same response to the id it reused.
    """

    calls: list[ToolCall]
    refused: dict[str, str] = field(default_factory=dict)

    @property
    def runnable(self) -> list[ToolCall]:
        """The calls that go on to the gate: every call but the refused repeats."""
        return [call for call in self.calls if call.id not in self.refused]

    def refusal(self, call: ToolCall) -> dict[str, str]:
        """The tool result a refused repeat gets instead of running."""
        return {
            "status": "NOT_EXECUTED",
            "reason": f"call id '{self.refused[call.id]}' was used twice in one response; this call was "
            "not run - issue it again with its own id if it is still needed",
        }


def storable_call_id(call_id: str) -> bool:
    """Whether PostgreSQL can store ``call_id`` as given and it cannot be mistaken for a journal step."""
    if not call_id or len(call_id) > CALL_ID_MAX_CHARS or "\x00" in call_id:
        return False
    if call_id.startswith(JOURNAL_STEP_PREFIX):
        return False
    try:
        call_id.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, which JSON text may carry
        return False
    return True


def distinct_call_ids(calls: list[ToolCall]) -> ResponseCalls:
    """Every call of one model response gets an id of its own before anything else looks at it.

    - An id the database cannot store (empty, over ``CALL_ID_MAX_CHARS`` characters, a NUL or a lone
      surrogate) or one in the journal's step-key space (``http:…``) is replaced by ``gen-<uuid>``, as
      a call without an id is: a hostile id never fails the turn.
    - The first call with a given id keeps it. Every later call of the same response with an id already
      used gets a fresh ``gen-<uuid>`` (the transcript's assistant message carries it, so every tool
      message answers exactly one call) and is refused: it is neither run nor paused, and its tool
      result (``ResponseCalls.refusal``) tells the model why.
    """
    used: set[str] = set()
    refused: dict[str, str] = {}
    named: list[ToolCall] = []
    for call in calls:
        call_id = call.id if isinstance(call.id, str) and storable_call_id(call.id) else ""
        if call_id in used:
            fresh = generated_call_id()
            refused[fresh] = call_id
            call_id = fresh
        elif not call_id:
            call_id = generated_call_id()
        used.add(call_id)
        named.append(call if call_id == call.id else ToolCall(call_id, call.name, call.arguments))
    return ResponseCalls(calls=named, refused=refused)
