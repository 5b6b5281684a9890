"""The request fingerprint: what changes it and what does not (toolgate.pinning)."""

from __future__ import annotations

import pytest

from toolgate.http_requests import BuiltRequest
from toolgate.pinning import canonical_request, request_fingerprint, request_preview


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


def fp(built: BuiltRequest, caller_token: str = "") -> str:
    return request_fingerprint(built, caller_token)


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


def test_two_secrets_in_the_body_give_different_fingerprints_though_both_display_redacted():
    one = req(body=b'{"api_key": "sk-aaaaaaaaaaaaaaaaaaaaaaaa"}')
    two = req(body=b'{"api_key": "sk-bbbbbbbbbbbbbbbbbbbbbbbb"}')
    assert fp(one) != fp(two)
    assert request_preview(one)["body"] == request_preview(two)["body"]
    assert "sk-a" not in request_preview(one)["body"]


def test_credential_headers_are_fingerprinted_redacted_so_another_approver_passes():
    alice = req(headers={"Authorization": "Token alice-token-0123456789", "X-Team": "ops"})
    approver = req(headers={"Authorization": "Token approver-token-9876543210", "X-Team": "ops"})
    assert fp(alice) == fp(approver)


def test_the_live_caller_token_never_counts_even_in_a_plain_header():
    alice = req(headers={"X-On-Behalf": "tok-alice-123456"})
    approver = req(headers={"X-On-Behalf": "tok-approver-654321"})
    assert fp(alice, "tok-alice-123456") == fp(approver, "tok-approver-654321")


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


def test_the_preview_is_redacted_and_capped():
    built = req(
        url="https://user:pw@api.example/deploy/7?token=abcdefghijkl",
        headers={"Authorization": "Bearer abcdefghijklmnopqrstuvwxyz", "X-Client-Auth": "Bearer " + "z" * 30},
        body=b"x" * 9000,
    )
    preview = request_preview(built)
    assert "abcdefghijklmnopqrstuvwxyz" not in str(preview) and "pw@" not in preview["uri"]
    assert preview["headers"]["authorization"] == "<REDACTED>"
    assert preview["headers"]["x-client-auth"] == "Bearer <REDACTED>"
    assert preview["bodyTruncated"] is True and len(preview["body"].encode()) <= 8192
    # the query in the URL is part of what is sent: shown (redacted) beside the declared pairs
    assert preview["queryParams"] == {"token": "<REDACTED>", "version": "3"}
