"""The agents' names, lent to the HITL core's reviewer pages (``approvals.agent_names``).

Registered at startup so the admin inbox can show "account-bot v3" instead of an id, and find pauses by
agent name, without approvals/ importing this layer.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from django.db.models import F, OuterRef, QuerySet, Subquery

from approvals.agent_names import register_agent_directory
from conversations.models import Agent


class AgentNames:
    def names_of(self, agent_ids: Iterable[uuid.UUID] | QuerySet) -> dict[uuid.UUID, str]:
        return dict(Agent.objects.filter(pk__in=agent_ids).values_list("pk", "name"))

    def name_of_agent(self, agent_id: OuterRef) -> Subquery:
        return Subquery(Agent.objects.filter(pk=agent_id).values("name")[:1])

    def agent_rows(self) -> QuerySet:
        return Agent.objects.annotate(agent_name=F("name"))


def register() -> None:
    register_agent_directory(AgentNames())
