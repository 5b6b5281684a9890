"""The admin inbox names agents (their current name, no query per row) and search finds pauses by agent
name, owner, short and full ids (approvals.admin.search, approvals.agent_names).

The query bound with names: test_admin_inbox.py; the search's plans: test_admin_inbox_search_plan.py."""

from __future__ import annotations

import uuid

import pytest

from conversations.models import Agent
from tests.approvals.test_admin_inbox import INBOX, listed, logged_in, page, rows, staff

pytestmark = pytest.mark.django_db


def test_the_list_and_the_decision_page_name_the_agent_by_its_current_name(approver):
    agent = Agent.objects.create(name="account-bot")
    (pause,) = rows(staff("carol"), 1, agent_id=agent.pk, agent_version=3)
    Agent.objects.filter(pk=agent.pk).update(name="account-bot-2")  # renamed after the pause opened
    client = logged_in(approver)
    html = client.get(INBOX).content.decode()
    assert f'<span title="{agent.pk}">account-bot-2 v3</span>' in html
    assert f"{str(agent.pk)[:8]}… v3" not in html
    decision = client.get(page(pause)).content.decode()
    assert "<strong>account-bot-2</strong> v3" in decision and str(agent.pk) in decision


def test_search_by_agent_name_short_id_and_full_id(approver):
    carol = staff("carol")
    bot = Agent.objects.create(name="Account-Bot")
    (by_bot,) = rows(carol, 1, agent_id=bot.pk, reason="Close the account")
    (grouped,) = rows(carol, 1, surface="group", subject_type="discussion", group_id=uuid.uuid4())
    (other,) = rows(carol, 1, agent_id=Agent.objects.create(name="mail-bot").pk)
    client = logged_in(approver)
    assert listed(client.get(INBOX, {"q": "account-bot"})) == {by_bot.pk}
    assert listed(client.get(INBOX, {"q": "bot carol"})) == {by_bot.pk, other.pk}  # every word matches
    assert listed(client.get(INBOX, {"q": "account-bot dave"})) == set()
    assert listed(client.get(INBOX, {"q": '"close the"'})) == {by_bot.pk}  # a quoted phrase is one word
    assert listed(client.get(INBOX, {"q": "close bot-account"})) == set()
    for pause in (by_bot, grouped, other):
        short = str(pause.subject_id)[:8]
        assert listed(client.get(INBOX, {"q": short})) == {pause.pk}, short
        assert listed(client.get(INBOX, {"q": f"{short}…"})) == {pause.pk}, short  # as the list shows it
        assert listed(client.get(INBOX, {"q": str(pause.pk)[:13]})) == {pause.pk}
    assert listed(client.get(INBOX, {"q": str(grouped.group_id)[:8]})) == {grouped.pk}
    assert listed(client.get(INBOX, {"q": str(grouped.group_id)})) == {grouped.pk}
    assert listed(client.get(INBOX, {"q": str(bot.pk)[:8]})) == {by_bot.pk}
    assert listed(client.get(INBOX, {"q": str(bot.pk)})) == {by_bot.pk}
    assert listed(client.get(INBOX, {"q": str(by_bot.subject_id).upper()})) == {by_bot.pk}
    assert listed(client.get(INBOX, {"q": "0000000"})) == set()  # 7 hex digits are text, not an id
