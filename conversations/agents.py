"""Agent services: versioned documents, validation on every write, deployment per environment."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.db.models import Exists, Max, OuterRef
from django.utils import timezone

from approvals.errors import BadRequest, Conflict, NotDeployed, NotFound
from conversations.agent_document import DocumentReport, validate_agent_document
from conversations.models import Agent, AgentVersion, Deployment, Environment


def report_or_raise(document: Any, *, file: str | None = None) -> DocumentReport:
    report = validate_agent_document(document)
    if report.errors:
        errors = [{**e.as_dict(), **({"file": file} if file else {})} for e in report.errors]
        where = f"{file}: " if file else ""
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise BadRequest(f"{where}{first['field']}: {first['message']}{more}", errors=errors)
    return report


def live_agent(agent_id: uuid.UUID | str) -> Agent:
    try:
        key = agent_id if isinstance(agent_id, uuid.UUID) else uuid.UUID(str(agent_id))
        return Agent.objects.get(pk=key, deleted_at__isnull=True)
    except (Agent.DoesNotExist, ValueError, TypeError):
        raise NotFound("Agent not found.") from None


def agent_version(agent_id: uuid.UUID | str, version: int | None = None) -> AgentVersion:
    agent = live_agent(agent_id)
    versions = AgentVersion.objects.filter(agent=agent)
    row = versions.filter(version=version).first() if version is not None else versions.order_by("-version").first()
    if row is None:
        raise NotFound(f"Agent {agent_id} has no version {version}.")
    return row


@transaction.atomic
def create_agent(*, document: dict[str, Any], created_by: Any = None) -> AgentVersion:
    report_or_raise(document)
    agent = Agent.objects.create(name=document["name"], created_by=created_by)
    return AgentVersion.objects.create(agent=agent, version=1, document=document)


@transaction.atomic
def update_agent(*, agent_id: uuid.UUID | str, document: dict[str, Any]) -> AgentVersion:
    report_or_raise(document)
    agent = Agent.objects.select_for_update().filter(pk=live_agent(agent_id).pk).get()
    latest = AgentVersion.objects.filter(agent=agent).aggregate(v=Max("version"))["v"] or 0
    agent.name = document["name"]
    agent.save(update_fields=["name"])
    return AgentVersion.objects.create(agent=agent, version=latest + 1, document=document)


@transaction.atomic
def delete_agent(*, agent_id: uuid.UUID | str) -> None:
    """Soft delete: conversations keep running on the versions they started on, but no new ones start."""
    agent = live_agent(agent_id)
    Deployment.objects.filter(agent=agent).delete()
    agent.deleted_at = timezone.now()
    agent.save(update_fields=["deleted_at"])


def _environment(environment: str) -> str:
    if environment not in Environment.values:
        raise BadRequest(
            f"unknown environment '{environment}'",
            errors=[{"field": "environment", "message": f"must be one of {', '.join(Environment.values)}"}],
        )
    return environment


def deploy_agent(*, agent_id: uuid.UUID | str, version: int | None, environment: str) -> AgentVersion:
    row = agent_version(agent_id, version)
    Deployment.objects.get_or_create(agent=row.agent, version=row.version, environment=_environment(environment))
    return row


def undeploy_agent(*, agent_id: uuid.UUID | str, version: int | None, environment: str) -> None:
    """Paused conversations do not keep a version deployed: their resume will answer NOT_DEPLOYED."""
    environment = _environment(environment)
    agent = live_agent(agent_id)
    deployments = Deployment.objects.filter(agent=agent, environment=environment)
    if version is not None:
        deployments = deployments.filter(version=version)
    if not deployments.exists():
        raise Conflict(f"Agent {agent_id} is not deployed in {environment}.")
    deployments.delete()


def newest_deployed_version(*, agent_id: uuid.UUID | str, environment: str) -> AgentVersion:
    """The newest version of a live agent deployed in ``environment``, in one query; NotFound (unknown
    or deleted agent) or NotDeployed."""
    try:
        key = agent_id if isinstance(agent_id, uuid.UUID) else uuid.UUID(str(agent_id))
    except (ValueError, TypeError):
        raise NotFound("Agent not found.") from None
    environment = _environment(environment)
    deployed = Deployment.objects.filter(agent_id=OuterRef("agent_id"), version=OuterRef("version"),
                                         environment=environment)
    row = (AgentVersion.objects.select_related("agent")
           .filter(agent_id=key, agent__deleted_at__isnull=True).filter(Exists(deployed))
           .order_by("-version").first())
    if row is None:
        live_agent(key)  # unknown or deleted: NotFound
        raise NotDeployed(f"Agent {key} is not deployed in {environment}.")
    return row


def deployed_version(*, agent_id: uuid.UUID, version: int, environment: str) -> AgentVersion | None:
    """The version a conversation runs on if it is still deployed (its agent not deleted), else None:
    ``is_deployed`` and the version's row in one query."""
    deployed = Deployment.objects.filter(agent_id=OuterRef("agent_id"), version=OuterRef("version"),
                                         environment=environment)
    return (AgentVersion.objects.filter(agent_id=agent_id, version=version, agent__deleted_at__isnull=True)
            .filter(Exists(deployed)).first())


def deployed_versions(*, agent_id: uuid.UUID | str, environment: str) -> list[int]:
    agent = live_agent(agent_id)
    return list(
        Deployment.objects.filter(agent=agent, environment=_environment(environment))
        .order_by("version")
        .values_list("version", flat=True)
    )


def is_deployed(*, agent_id: uuid.UUID, version: int, environment: str) -> bool:
    return Deployment.objects.filter(
        agent_id=agent_id, version=version, environment=environment, agent__deleted_at__isnull=True
    ).exists()
