"""The ids of one model response's calls (toolgate.runtime.call_ids.distinct_call_ids): the first call with an id
keeps it, a repeat gets a fresh id and is refused, an id the database cannot store is replaced."""

from __future__ import annotations

import pytest

from toolgate.gate.tools import ToolCall
from toolgate.runtime.call_ids import CALL_ID_MAX_CHARS, distinct_call_ids


def call(call_id: str, name: str = "transfer_funds", arguments: str = "{}") -> ToolCall:
    return ToolCall(call_id, name, arguments)


def test_the_call_id_limit_is_the_columns_length() -> None:
    assert CALL_ID_MAX_CHARS == 200


def test_distinct_storable_ids_are_kept_as_given() -> None:
    calls = [call("call-1"), call("x" * 200, "get_balance"), call("call_ä-é", "delete_user")]
    response = distinct_call_ids(calls)
    assert response.calls == calls and response.refused == {} and response.runnable == calls


def test_a_repeated_id_in_one_response_is_renamed_and_refused_the_first_keeps_it() -> None:
    first, repeat, other, again = (
        call("call-1", arguments='{"to": "bob"}'),
        call("call-1", "delete_user", '{"name": "admin"}'),
        call("call-2"),
        call("call-1", arguments='{"to": "bob"}'),  # the identical call is a repeat all the same
    )
    response = distinct_call_ids([first, repeat, other, again])
    ids = [c.id for c in response.calls]
    assert ids[0] == "call-1" and ids[2] == "call-2"
    assert ids[1].startswith("gen-") and ids[3].startswith("gen-") and len(set(ids)) == 4
    assert [(c.name, c.arguments) for c in response.calls] == [
        (c.name, c.arguments) for c in (first, repeat, other, again)
    ]
    assert response.refused == {ids[1]: "call-1", ids[3]: "call-1"}
    assert response.runnable == [first, other]
    assert response.refusal(response.calls[1]) == {
        "status": "NOT_EXECUTED",
        "reason": "call id 'call-1' was used twice in one response; this call was not run - issue it "
        "again with its own id if it is still needed",
    }


@pytest.mark.parametrize(
    "hostile",
    [
        "",
        "x" * 201,
        "a" * 10_000,
        "call\x00-1",
        "call-\ud800",
        "http:payments:transfer_funds",  # the journal's key of an http step of a continuation
    ],
    ids=["empty", "201-chars", "10k-chars", "nul", "lone-surrogate", "journal-step-key"],
)
def test_an_id_the_database_cannot_store_is_replaced_and_the_call_runs_on(hostile: str) -> None:
    response = distinct_call_ids([call(hostile), call(hostile, "get_balance")])
    first, second = response.calls
    assert first.id.startswith("gen-") and second.id.startswith("gen-") and first.id != second.id
    assert len(first.id) <= CALL_ID_MAX_CHARS
    assert response.refused == {}  # two unstorable ids are two calls, not a repeat of one
    assert response.runnable == response.calls
