"""The request fingerprint and the request's view: what changes the fingerprint and what the reviewer is
shown (toolgate.gate.pinning, toolgate.outbound.request_views)."""

from __future__ import annotations

import pytest

from toolgate.gate.pinning import canonical_request, request_fingerprint, request_preview
from toolgate.outbound.http_requests import BuiltRequest, build_request
from toolgate.outbound.request_views import PREVIEW_BODY_MAX_BYTES


def req(**changes) -> BuiltRequest:
    base = {
        "method": "POST",
        "url": "https://api.example/deploy/7",
        "query": [("version", "3")],
        "headers": {"Content-Type": "application/json", "X-Team": "ops"},
        "body": b'{"a":1}',
        "content_type": None,
    }
    base.update(changes)
    return BuiltRequest(**base)


def fp(built: BuiltRequest) -> str:
    return request_fingerprint(built)


TASK = {"targetServerUrl": "https://pay.example"}


def built_call(request: dict, args: dict, caller_token: str | None = None) -> BuiltRequest:
    return build_request(TASK, {"name": "pay", "request": request}, {"args": args}, caller_token=caller_token)


def test_stable_under_header_order_header_case_and_method_case():
    reordered = req(headers={"x-team": "ops", "CONTENT-TYPE": "application/json"}, method="post")
    assert fp(reordered) == fp(req())


@pytest.mark.parametrize(
    "changes",
    [
        {"method": "PUT"},
        {"url": "https://api.example/deploy/8"},
        {"query": [("version", "4")]},
        {"query": [("version", "3"), ("force", "true")]},
        {"query": [("version", "3"), ("version", "4")]},
        {"body": b'{"a":2}'},
        {"headers": {"Content-Type": "application/json", "X-Team": "dev"}},
        {"headers": {"Content-Type": "application/json", "X-Team": "ops", "X-Extra": "1"}},
    ],
)
def test_changes_with_any_part_of_the_request(changes):
    assert fp(req(**changes)) != fp(req())


def test_an_empty_query_value_differs_from_an_absent_one():
    assert fp(req(query=[("version", "3"), ("dry", "")])) != fp(req())


def test_the_fingerprint_changes_when_any_byte_the_model_controls_changes():
    """A credential-shaped value the model put in a header (or anywhere) is part of what is approved: it
    was fingerprinted redacted before, so it could change after approval unnoticed."""
    request = {"method": "POST", "path": "/wire", "headers": {"Authorization": "Bearer {args.token}"}}
    one = built_call(request, {"token": "abcdefghijklmnopqrstuvwxyz0123"})
    two = built_call(request, {"token": "zyxwvutsrqponmlkjihgfedcba3210"})
    assert fp(one) != fp(two)
    shaped = {"method": "POST", "path": "/wire", "body": {"to": "{args.to}"}}
    assert fp(built_call(shaped, {"to": "AKIAABCDEFGHIJKLMNOP"})) != fp(
        built_call(shaped, {"to": "AKIAABCDEFGHIJKLMNOQ"})
    )


def test_two_secrets_give_different_fingerprints_though_both_are_shown_by_name(monkeypatch):
    request = {"method": "POST", "path": "/wire", "headers": {"X-Key": "${env:PAY_KEY}"}, "body": {"a": 1}}
    monkeypatch.setenv("PAY_KEY", "first-secret-value-123")
    one = built_call(request, {})
    monkeypatch.setenv("PAY_KEY", "second-secret-value-456")
    two = built_call(request, {})
    assert fp(one) != fp(two)
    assert request_preview(one) == request_preview(two)
    assert request_preview(one)["headers"]["x-key"] == "${env:PAY_KEY}"
    assert "secret-value" not in str(request_preview(one))


def test_the_callers_token_never_counts_so_another_approver_passes():
    request = {"method": "POST", "path": "/wire", "headers": {"Authorization": "Token ${caller:token}"}}
    alice = built_call(request, {}, caller_token="alice-token-0123456789")
    approver = built_call(request, {}, caller_token="approver-token-9876543210")
    assert fp(alice) == fp(approver)
    assert request_preview(alice)["headers"]["authorization"] == "Token ${caller:token}"


def test_forged_field_boundaries_do_not_collide():
    # a body that contains what looks like a header field, against a request that has that header
    forged = req(headers={}, body=b"x\nheader.x-team:3:ops\n")
    honest = req(headers={"X-Team": "ops"}, body=b"x")
    assert fp(forged) != fp(honest)
    # a query value holding the display separator against two values
    one_value = req(query=[("tag", "a, b")])
    two_values = req(query=[("tag", "a"), ("tag", "b")])
    assert fp(one_value) != fp(two_values)
    assert canonical_request(one_value) != canonical_request(two_values)


def test_the_fingerprint_is_a_keyed_hmac(settings):
    before = fp(req())
    settings.HITL_PINNING_KEY = "another-server-secret"
    assert fp(req()) != before


def test_the_preview_shows_the_request_as_sent_query_included_and_is_capped():
    built = req(
        url="https://api.example/deploy/7?payee=mallory-IBAN-666",
        headers={"X-Client-Auth": "Bearer " + "z" * 30},
        body=b"x" * (PREVIEW_BODY_MAX_BYTES + 1),
    )
    preview = request_preview(built)
    assert preview["url"] == "https://api.example/deploy/7?payee=mallory-IBAN-666&version=3"
    assert preview["query"] == [["payee", "mallory-IBAN-666"], ["version", "3"]]
    assert preview["headers"]["x-client-auth"] == "Bearer " + "z" * 30  # as sent: the reviewer judges it
    assert preview["bodyTruncated"] is True and len(preview["body"].encode()) == PREVIEW_BODY_MAX_BYTES
