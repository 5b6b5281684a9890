"""manage.py hitl_demo [--created-by USERNAME]

Creates (or reuses, by name) the demo agent "account-bot" and deploys it to production, and the demo
group "demo-discussion" with its three member agents (deployed too); prints the group id, then the
agent id on the last line of stdout. Saying "delete my account" to the agent pauses the conversation
for a human decision; "hello" gets a greeting.

The command lives in groups/, the top app, because it sets up both surfaces.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from conversations.agents import create_agent, deploy_agent
from conversations.demo_agent import DEMO_AGENT_NAME, demo_agent_document
from conversations.models import Agent, Deployment, Environment
from groups.demo_group import DEMO_GROUP_NAME, DEMO_MEMBERS, demo_group_document, demo_member_document
from groups.models import Group
from groups.store import create_group

PRODUCTION = Environment.PRODUCTION.value


def _deployed_agent(document: dict[str, Any], creator: Any) -> tuple[uuid.UUID, int, str]:
    """The live agent named like ``document`` (created from it if there is none), its latest version
    deployed to production: (agent id, version, "Created" or "Reused")."""
    agent = Agent.objects.filter(name=document["name"], deleted_at__isnull=True).first()
    if agent is None:
        created = create_agent(document=document, created_by=creator)
        agent_id, version, what = created.agent_id, created.version, "Created"
    else:
        latest = agent.versions.order_by("-version").first()
        if latest is None:
            raise CommandError(f"agent {agent.id} ({document['name']}) has no versions")
        agent_id, version, what = agent.id, latest.version, "Reused"
    already = Deployment.objects.filter(agent_id=agent_id, version=version, environment=PRODUCTION)
    if not already.exists():
        deploy_agent(agent_id=agent_id, version=version, environment=PRODUCTION)
    return agent_id, version, what


class Command(BaseCommand):
    help = (
        "Create (or reuse) and deploy the demo agent 'account-bot' and the demo group 'demo-discussion'; "
        "prints the agent id on the last line."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--created-by", metavar="USERNAME", help="record this user as the creator of what is created"
        )

    def handle(self, *args, created_by: str | None, **options):
        creator = None
        if created_by:
            creator = get_user_model().objects.filter(username=created_by).first()
            if creator is None:
                raise CommandError(f"no user named {created_by!r}")

        # No surrounding transaction: the services may open durable atomic blocks of their own.
        members = {
            name: str(_deployed_agent(demo_member_document(name, answer), creator)[0])
            for name, _, answer in DEMO_MEMBERS
        }
        group = Group.objects.filter(name=DEMO_GROUP_NAME, deleted_at__isnull=True).first()
        if group is None:
            group_id = create_group(document=demo_group_document(members), created_by=creator).group_id
            what = "Created"
        else:
            group_id, what = group.id, "Reused"
        self.stdout.write(
            f"{what} demo group {DEMO_GROUP_NAME} ({', '.join(members)}, deployed to {PRODUCTION}); group id:"
        )
        self.stdout.write(str(group_id))

        agent_id, version, what = _deployed_agent(demo_agent_document(), creator)
        self.stdout.write(
            f"{what} demo agent {DEMO_AGENT_NAME} v{version}, deployed to {PRODUCTION}; agent id:"
        )
        self.stdout.write(str(agent_id))
