"""No existence oracle: a caller who may not use a conversation or pause cannot tell, from anything in
the answer, whether it exists, is someone else's or has no owner (REST problem bodies and admin pages)."""

from __future__ import annotations

import re
import uuid

import pytest
from django.test import Client

from approvals.models import Pause, PauseStatus
from conversations.models import Conversation
from harnesses.factories import deployed_agent, paused_conversation
from harnesses.users import client_for, make_user

pytestmark = pytest.mark.django_db

# Every conversation endpoint, with a body a permitted caller could send.
ENDPOINTS = [
    ("get", "", None),
    ("post", "", {"input": "hello"}),
    ("post", "/undo", None),
    ("post", "/redo", None),
    ("post", "/endConversation", None),
    ("post", "/resume", {"verdict": "APPROVED", "note": "mine now"}),
    ("post", "/cancel", None),
    ("get", "/approval-status", None),
    ("get", "/approval-status?detail=full", None),
]


def answer(client, method: str, conversation_id: str, suffix: str, body: dict | None):
    path = f"/agents/{conversation_id}{suffix}"
    response = client.get(path) if method == "get" else client.post(path, body, format="json")
    return response.status_code, response["Content-Type"], response.json()


def test_no_existence_oracle_same_problem_for_unknown_and_foreign(alice, bob):
    agent_id = deployed_agent()
    bobs = paused_conversation(client_for(bob), agent_id)
    ownerless = paused_conversation(client_for(bob), agent_id)
    Conversation.objects.filter(pk=ownerless).update(owner=None)
    Pause.objects.filter(subject_id=ownerless).update(owner=None, raised_by=None)
    alice_client = client_for(alice)

    for method, suffix, body in ENDPOINTS:
        unknown = answer(alice_client, method, str(uuid.uuid4()), suffix, body)
        assert unknown[0] == 403 and unknown[1] == "application/problem+json", (suffix, unknown)
        assert unknown[2]["code"] == "FORBIDDEN"
        for other in (bobs, ownerless, "not-a-uuid"):
            assert answer(alice_client, method, other, suffix, body) == unknown, (method, suffix, other)
    # and nothing was touched while she probed
    assert set(Pause.objects.values_list("status", flat=True)) == {PauseStatus.PENDING}
    assert set(Conversation.objects.values_list("state", flat=True)) == {"AWAITING_HUMAN"}


def normalized(html: str, pause_id: str) -> str:
    """The page without the id asked for, the per-render CSRF mask and the time the list was drawn."""
    return DRAWN_AT.sub("<since>", CSRF.sub("<csrf>", html.replace(pause_id, "<id>")))


CSRF = re.compile(r'name="csrfmiddlewaretoken" value="[^"]*"')
DRAWN_AT = re.compile(r'data-since="[^"]*"')  # the inbox's new-work poll asks what came after this


def test_no_existence_oracle_in_admin_same_page_for_unknown_and_foreign():
    inbox = "/admin/approvals/pendingapproval/"
    carol, dave = make_user("carol"), make_user("dave")
    for user in (carol, dave):  # staff without a HITL role: each decides only their own pauses
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    foreign = Pause.objects.get(subject_id=paused_conversation(client_for(dave)))
    client = Client()
    client.force_login(carol)

    def seen(pause_id: str) -> list[tuple]:
        pages = [
            client.get(f"{inbox}{pause_id}/change/"),
            client.post(f"{inbox}{pause_id}/change/", {"expected_pause_id": pause_id, "verdict": "APPROVED"}),
            client.get(f"{inbox}{pause_id}/history/", follow=True),
            client.get(f"{inbox}{pause_id}/", follow=True),
            client.post(f"{inbox}{pause_id}/delete/", {"post": "yes"}),
            client.get(f"{inbox}?q={pause_id}"),
            client.post(
                f"{inbox}bulk-decide/", {"verdict": "APPROVED", "pause_ids": [pause_id]}, follow=True
            ),
        ]
        return [(page.status_code, normalized(page.content.decode(), pause_id)) for page in pages]

    unknown = seen(str(uuid.uuid4()))
    assert [status for status, _ in unknown] == [404, 404, 200, 404, 403, 200, 404]  # bulk: the styled 404
    assert seen(str(foreign.pk)) == unknown
    assert Pause.objects.get(pk=foreign.pk).status == PauseStatus.PENDING
