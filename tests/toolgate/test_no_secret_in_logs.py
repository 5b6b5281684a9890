"""No secret in any log line: a canary secret in path, query, header and body reaches no log record.

httpx logs every request's full URL at INFO; the settings keep it at WARNING, and every record of the
process is redacted as it is created (toolgate.log_redaction), so even a logger forced to DEBUG, or an
exception whose text carries the value, shows ``<REDACTED>``.
"""

from __future__ import annotations

import logging

import pytest

from harnesses.agents import payments_agent
from harnesses.factories import account_bot, deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from tests.conftest import CANARY_SECRET_NAME
from toolgate.log_redaction import redact_record, remember_secret

VAULT = "${vault:" + CANARY_SECRET_NAME + "}"
EVERYWHERE = {
    "method": "POST",
    "path": "/ping/" + VAULT + "?k=" + VAULT,
    "queryParams": {"q": VAULT},
    "headers": {"X-Api-Key": VAULT, "X-Plain": "id " + VAULT},
    "body": {"key": VAULT, "text": "value " + VAULT},
}


@pytest.fixture
def every_logger_at_debug(caplog):
    """Capture everything, httpx and httpcore included (the settings alone keep them at WARNING)."""
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore", "toolgate", "conversations", "approvals", "django"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def assert_canary_in_no_record(caplog, canary: str) -> None:
    assert caplog.records, "nothing was logged: the test would prove nothing"
    for record in caplog.records:
        assert canary not in record.getMessage(), f"{record.name}: {record.getMessage()}"
        assert canary not in (record.exc_text or "") and canary not in (record.stack_info or "")
    assert canary not in caplog.text


def httpx_request_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "httpx" and "HTTP Request" in r.getMessage()]


def test_httpx_and_httpcore_stay_at_warning_by_settings():
    assert logging.getLogger("httpx").getEffectiveLevel() >= logging.WARNING
    assert logging.getLogger("httpcore").getEffectiveLevel() >= logging.WARNING


@pytest.mark.django_db
def test_no_secret_in_any_log_line_of_a_rule_call(
    alice_client, http_recorder, canary_secret, every_logger_at_debug
):
    document = account_bot(hitlConfig={})
    document["workflows"][0]["tasks"][1]["rules"][1]["actions"] = ["say_hello", "ping"]
    document["workflows"][0]["tasks"].insert(
        2,
        {
            "id": "ping",
            "type": "httpcalls",
            "targetServerUrl": http_recorder.url,
            "calls": [{"name": "ping", "actions": ["ping"], "request": EVERYWHERE}],
        },
    )
    conversation_id = start(alice_client, deployed_agent(document))
    assert say(alice_client, conversation_id, "hello").status_code == 200
    (sent,) = http_recorder.requests
    assert canary_secret in sent["path"] and canary_secret in sent["query"]  # it was really sent
    lines = httpx_request_lines(every_logger_at_debug)
    assert lines and all("<REDACTED>" in line for line in lines)
    assert_canary_in_no_record(every_logger_at_debug, canary_secret)


@pytest.mark.django_db
def test_no_secret_in_any_log_line_of_a_gated_tool_call(
    alice_client, approver_client, http_recorder, canary_secret, every_logger_at_debug
):
    document = payments_agent(http_recorder.url)
    document["workflows"][0]["tasks"][1]["calls"][0]["request"] = {
        **EVERYWHERE,
        "path": "/transfers/" + VAULT + "?k=" + VAULT,
    }
    conversation_id = start(alice_client, deployed_agent(document))
    assert say(alice_client, conversation_id, "please transfer").json()["state"] == "AWAITING_HUMAN"
    assert (
        approver_client.post(
            f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json"
        ).status_code
        == 200
    )
    run_queued_tasks()
    (sent,) = [r for r in http_recorder.requests if r["path"].startswith("/transfers")]
    assert canary_secret in sent["path"]
    assert httpx_request_lines(every_logger_at_debug)
    assert_canary_in_no_record(every_logger_at_debug, canary_secret)


def test_no_secret_in_an_exception_or_an_argument_of_a_log_record(caplog):
    secret = "remembered-secret-value-42"
    remember_secret(secret)
    logger = logging.getLogger("tests.log_redaction")
    caplog.set_level(logging.DEBUG, logger="tests.log_redaction")
    try:
        raise RuntimeError(f"could not call http://h/ping/{secret}")
    except RuntimeError:
        logger.exception("call failed for %s", f"k={secret}")
    logger.info("plain text with an OpenAI key sk-%s", "a" * 30)
    assert_canary_in_no_record(caplog, secret)
    assert "sk-aaaa" not in caplog.text and "<REDACTED>" in caplog.text


def test_redaction_keeps_the_arguments_a_formatter_unpacks():
    """uvicorn's access formatter unpacks ``args``: a redacted record keeps them as a tuple."""
    secret = "another-secret-in-a-path-77"
    remember_secret(secret)
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", f"/x/{secret}", "1.1", 200),
        None,
    )
    redact_record(record)
    assert len(record.args) == 5 and record.args[2] == "/x/<REDACTED>"
    assert secret not in record.getMessage()
