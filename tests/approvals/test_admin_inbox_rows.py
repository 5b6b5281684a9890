"""What an inbox row says a tool call asks: each call's tool and, for an HTTP call, its method and path,
never its host, query, headers or body."""

from __future__ import annotations

from approvals.admin.inbox import calls_line
from approvals.models import Pause, PauseKind


def tool_pause(calls: list[dict], tool_names: list[str] | None = None) -> Pause:
    return Pause(kind=PauseKind.TOOL_CALL, details={"calls": calls}, tool_names=tool_names or [])


def test_an_http_call_is_its_tool_method_and_path_only():
    pause = tool_pause(
        [
            {
                "toolName": "transfer_funds",
                "requestPreview": {
                    "method": "POST",
                    "url": "https://payments.example/v1/transfers?token=secret",
                    "headers": {"X-Api-Key": "${vault:payments.key}"},
                    "body": '{"amount": 100}',
                },
            },
            {"toolName": "send_receipt"},
        ]
    )
    line = calls_line(pause)
    assert line == "transfer_funds → POST /v1/transfers, send_receipt"
    assert "payments.example" not in line and "secret" not in line and "amount" not in line


def test_many_calls_are_counted_and_a_batch_without_calls_names_its_tools():
    many = tool_pause([{"toolName": f"tool_{index}"} for index in range(5)])
    assert calls_line(many) == "tool_0, tool_1, tool_2, and 2 more"
    assert calls_line(tool_pause([], ["transfer_funds"])) == "transfer_funds"
    assert calls_line(Pause(kind=PauseKind.RULE, details={})) == ""
