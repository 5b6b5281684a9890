"""manage.py hitl_demo [--created-by USERNAME]

Creates (or reuses, by name) the demo agent "account-bot" and deploys it to production, then
prints its agent id on the last line of stdout. Saying "delete my account" to it pauses the
conversation for a human decision; "hello" gets a greeting.
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from conversations.agents import create_agent, deploy_agent
from conversations.demo_agent import DEMO_AGENT_NAME, demo_agent_document
from conversations.models import Agent, Deployment, Environment


class Command(BaseCommand):
    help = "Create (or reuse) and deploy the demo agent 'account-bot'; prints its agent id on the last line."

    def add_arguments(self, parser):
        parser.add_argument(
            "--created-by", metavar="USERNAME", help="record this user as the agent's creator"
        )

    def handle(self, *args, created_by: str | None, **options):
        # Imported here so that the command is listed even while the agent services are missing.

        creator = None
        if created_by:
            creator = get_user_model().objects.filter(username=created_by).first()
            if creator is None:
                raise CommandError(f"no user named {created_by!r}")

        production = Environment.PRODUCTION.value
        # No surrounding transaction: the services may open durable atomic blocks of their own.
        agent = Agent.objects.filter(name=DEMO_AGENT_NAME, deleted_at__isnull=True).first()
        if agent is None:
            created = create_agent(document=demo_agent_document(), created_by=creator)
            agent_id, version, what = created.agent_id, created.version, "Created"
        else:
            latest = agent.versions.order_by("-version").first()
            if latest is None:
                raise CommandError(f"agent {agent.id} ({DEMO_AGENT_NAME}) has no versions")
            agent_id, version, what = agent.id, latest.version, "Reused"
        already = Deployment.objects.filter(agent_id=agent_id, version=version, environment=production)
        if not already.exists():
            deploy_agent(agent_id=agent_id, version=version, environment=production)

        self.stdout.write(
            f"{what} demo agent {DEMO_AGENT_NAME} v{version}, deployed to {production}; agent id:"
        )
        self.stdout.write(str(agent_id))
