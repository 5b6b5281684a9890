"""Errors that help on the history and bulk pages: a subject or pause the reviewer may
not see, an unknown one and a malformed id all get the same styled admin 404, and each writes one log line.
"""

from __future__ import annotations

import logging
import re
import uuid

import pytest

from approvals.models import AuditEntry, Pause, PauseStatus
from tests.approvals.test_admin_history import HISTORY, decided
from tests.approvals.test_admin_inbox import BULK, INBOX, logged_in, rows, select, staff

pytestmark = pytest.mark.django_db

CSRF = re.compile(r'name="csrfmiddlewaretoken" value="[^"]*"')


def styled_404(response, back_to: str) -> str:
    text = response.content.decode()
    assert response.status_code == 404, text[:300]
    assert 'id="hitl-not-found"' in text and 'id="site-name"' in text  # inside the admin's frame
    assert f'href="{back_to}"' in text  # and a way back
    return CSRF.sub("", text)


def test_a_history_of_someone_elses_subject_is_the_same_styled_404_as_an_unknown_or_malformed_one():
    theirs = decided(staff("owner"), 1, by=None, actor="system:timeout")[0]
    client = logged_in(staff("mallory"))
    pages = [
        client.get(HISTORY, {"subject": str(theirs.subject_id)}),
        client.get(HISTORY, {"subject": str(uuid.uuid4())}),
        client.get(HISTORY, {"subject": "not-an-id"}),
        client.get(f"{HISTORY}{theirs.pk}/change/"),
        client.get(f"{HISTORY}{uuid.uuid4()}/change/"),
        client.get(f"{HISTORY}x/change/"),
        client.get(f"{HISTORY}{theirs.pk}/history/"),
    ]
    texts = {styled_404(response, HISTORY) for response in pages}
    assert len(texts) == 1 and "There is no history here for you" in texts.pop()  # no existence oracle


def test_a_reviewer_opens_the_history_of_a_subject_they_may_see(approver):
    pause = decided(staff("owner"), 1, by=approver)[0]
    response = logged_in(approver).get(HISTORY, {"subject": str(pause.subject_id), "decided_by": "all"})
    assert response.status_code == 200 and pause in response.context["cl"].result_list


def test_a_bulk_selection_naming_a_hidden_or_malformed_pause_is_the_styled_404_and_decides_nothing():
    owner = staff("owner")
    theirs = rows(owner, 1)[0]
    mallory = staff("mallory")
    mine = rows(mallory, 1)[0]
    client = logged_in(mallory)
    pages = [
        select(client, "approve_selected", [theirs, mine]),
        client.post(
            INBOX, {"action": "approve_selected", "_selected_action": [str(uuid.uuid4())], "index": "0"}
        ),
        client.post(
            INBOX, {"action": "approve_selected", "_selected_action": ["x", str(mine.pk)], "index": "0"}
        ),
        client.post(BULK, {"verdict": "APPROVED", "pause_ids": [str(theirs.pk), str(mine.pk)]}),
        client.post(BULK, {"verdict": "APPROVED", "pause_ids": [str(uuid.uuid4())]}),
        client.post(BULK, {"verdict": "APPROVED", "pause_ids": ["x", str(mine.pk)]}),
    ]
    assert len({styled_404(response, INBOX) for response in pages}) == 1
    assert set(Pause.objects.values_list("status", flat=True)) == {PauseStatus.PENDING}
    assert not AuditEntry.objects.filter(pause_id__in=[theirs.pk, mine.pk]).exists()


def test_a_bulk_selection_of_the_reviewers_own_pauses_still_confirms(approver):
    pauses = rows(staff("owner"), 2)
    response = select(logged_in(approver), "approve_selected", pauses)
    assert response.status_code == 200 and len(response.context["to_decide"]) == 2


@pytest.mark.parametrize("where", ["history", "bulk"])
def test_an_expected_404_writes_one_log_line_without_a_traceback(where, caplog):
    client = logged_in(staff("mallory"))
    with caplog.at_level(logging.WARNING, logger="django.request"):
        if where == "history":
            response = client.get(HISTORY, {"subject": "not-an-id"})
        else:
            response = client.post(BULK, {"verdict": "APPROVED", "pause_ids": ["x"]})
    assert response.status_code == 404
    records = [r for r in caplog.records if r.name == "django.request"]
    assert len(records) == 1 and records[0].exc_info is None and "Traceback" not in caplog.text
    assert records[0].getMessage().startswith("Not Found:")
