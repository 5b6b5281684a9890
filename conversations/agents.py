"""Agent services: versioned documents, validation on every write, deployment per environment."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Exists, Max, OuterRef
from django.utils import timezone

from approvals.decisions import pause_and_owner, pause_with_owner_columns
from approvals.models import Pause, PauseStatus, SubjectType
from approvals.optimistic_audit import SEEN_HEAD_WIDTH, SeenHead, seen_head_from, seen_head_join
from approvals.pause_caps import OpenPauses, open_pause_columns
from common import rows
from common.errors import BadRequest, Conflict, NotFound
from conversations.agent_document import validate_agent_document
from conversations.document_fields import DocumentReport
from conversations.errors import NotDeployed
from conversations.models import Agent, AgentVersion, Conversation, Deployment, Environment


def report_or_raise(
    document: Any,
    *,
    file: str | None = None,
    validate: Callable[[Any], DocumentReport] = validate_agent_document,
) -> DocumentReport:
    """``validate``'s report of ``document`` (an agent document unless told), or the 400 naming every error."""
    report = validate(document)
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
    row = (
        versions.filter(version=version).first()
        if version is not None
        else versions.order_by("-version").first()
    )
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
    Deployment.objects.get_or_create(
        agent=row.agent, version=row.version, environment=_environment(environment)
    )
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


@functools.cache
def _deployed_sql(newest: bool, counts: str = "") -> str:
    """A live agent's version deployed in an environment, with its agent: the newest, or one by number;
    ``counts``: more columns after them (``open_pause_columns``)."""
    which = 'ORDER BY v."version" DESC LIMIT 1' if newest else 'AND v."version" = %s'
    deployed = _still_deployed_sql(agent='v."agent_id"', version='v."version"', environment="%s")
    return (
        f"SELECT {rows.select_list(AgentVersion, 'v')}, {rows.select_list(Agent, 'a')}{counts} "  # nosec B608  # identifiers from model metadata, values are parameters
        f'FROM {rows.table(AgentVersion)} v JOIN {rows.table(Agent)} a ON a."id" = v."agent_id" '
        f'WHERE v."agent_id" = %s AND a."deleted_at" IS NULL '
        f"AND {deployed} {which}"
    )


def _still_deployed_sql(*, agent: str, version: str, environment: str) -> str:
    """The SQL condition "that agent's version is deployed in that environment" (a Deployment row exists),
    over the given column expressions; ``_still_deployed`` is the same condition for the ORM."""
    return (
        f'EXISTS (SELECT 1 FROM {rows.table(Deployment)} d WHERE d."agent_id" = {agent} '  # nosec B608  # identifiers from model metadata, values are parameters
        f'AND d."version" = {version} AND d."environment" = {environment})'
    )


def _still_deployed(environment: str) -> Exists:
    """For a query of AgentVersion rows: that row's version is deployed in ``environment``."""
    return Exists(
        Deployment.objects.filter(
            agent_id=OuterRef("agent_id"), version=OuterRef("version"), environment=environment
        )
    )


def _deployed_row(
    *, agent_id: uuid.UUID, version: int | None, environment: str, open_pauses_of: Any = None
) -> tuple[AgentVersion | None, OpenPauses | None]:
    params: list[Any] = [agent_id, environment] + ([] if version is None else [version])
    counts, count_params = "", []
    if open_pauses_of is not None:
        columns, count_params = open_pause_columns(owner=("%s", [open_pauses_of]), agent=('v."agent_id"', []))
        counts = f", {columns}"
    found = rows.fetch_one(_deployed_sql(version is None, counts), [*count_params, *params])
    if found is None:
        return None, None
    version_values, agent_values, count_values = rows.split(
        found, rows.width(AgentVersion), rows.width(Agent), 2 if counts else 0
    )
    row = rows.instance(AgentVersion, version_values)
    AgentVersion._meta.get_field("agent").set_cached_value(row, rows.instance(Agent, agent_values))
    return row, OpenPauses(*count_values) if counts else None


def newest_deployed_version(*, agent_id: uuid.UUID | str, environment: str) -> AgentVersion:
    """The newest version of a live agent deployed in ``environment``, in one query; NotFound (unknown
    or deleted agent) or NotDeployed."""
    return _newest_deployed(agent_id=agent_id, environment=environment, open_pauses_of=None)[0]


def newest_deployed_version_and_open_pauses(
    *, agent_id: uuid.UUID | str, environment: str, owner_id: Any
) -> tuple[AgentVersion, OpenPauses | None]:
    """``newest_deployed_version`` and, in the same statement, the pending pauses a start's caps count:
    ``owner_id``'s and the agent's (approvals.pause_caps); None where they are not read with it (off
    PostgreSQL), and the caps read them themselves."""
    return _newest_deployed(agent_id=agent_id, environment=environment, open_pauses_of=owner_id)


def _newest_deployed(
    *, agent_id: uuid.UUID | str, environment: str, open_pauses_of: Any
) -> tuple[AgentVersion, OpenPauses | None]:
    try:
        key = agent_id if isinstance(agent_id, uuid.UUID) else uuid.UUID(str(agent_id))
    except (ValueError, TypeError):
        raise NotFound("Agent not found.") from None
    environment = _environment(environment)
    open_pauses = None
    if rows.on_postgresql():
        row, open_pauses = _deployed_row(
            agent_id=key, version=None, environment=environment, open_pauses_of=open_pauses_of
        )
    else:
        row = (
            AgentVersion.objects.select_related("agent")
            .filter(agent_id=key, agent__deleted_at__isnull=True)
            .filter(_still_deployed(environment))
            .order_by("-version")
            .first()
        )
    if row is None:
        live_agent(key)  # unknown or deleted: NotFound
        raise NotDeployed(f"Agent {key} is not deployed in {environment}.")
    return row, open_pauses


def deployed_version(*, agent_id: uuid.UUID, version: int, environment: str) -> AgentVersion | None:
    """The version a conversation runs on if it is still deployed (its agent not deleted), else None:
    whether it is deployed and the version's row in one query."""
    if rows.on_postgresql():
        return _deployed_row(agent_id=agent_id, version=version, environment=environment)[0]
    return (
        AgentVersion.objects.filter(agent_id=agent_id, version=version, agent__deleted_at__isnull=True)
        .filter(_still_deployed(environment))
        .first()
    )


@dataclass(frozen=True)
class OnVersion:
    """A conversation and, read in the same statement, the version it runs on if that is still
    deployed (``deployed_version``; None when it is not), and its pending pause with the pause's owner
    when asked for (``find_on_version(with_pending=True)``; None: none pending, or not asked), and the
    pending pauses a say's caps count (``find_on_version(with_open_pauses=True)``, approvals.pause_caps;
    None: not read with it)."""

    conversation: Conversation
    version: AgentVersion | None
    pending: Pause | None = None
    open_pauses: OpenPauses | None = None
    # the conversation's audit head as the read saw it, read with ``with_pending`` (approvals.optimistic_audit)
    audit_head: SeenHead | None = None


def conversation_and_its_version(conversation_id: Any) -> OnVersion:
    """``find_on_version``, and Conversation.DoesNotExist if there is no such conversation."""
    found = find_on_version(conversation_id)
    if found is None:
        raise Conversation.DoesNotExist(f"no conversation {conversation_id}")
    return found


def find_on_version(
    conversation_id: Any, *, with_pending: bool = False, with_open_pauses: bool = False
) -> OnVersion | None:
    """A conversation and its deployed version in one query; None if there is no such conversation.
    ``with_pending``: its pending pause too, with the pause's owner, in the same query (what a decision
    needs: approvals.decisions.record_decision's ``pending``). ``with_open_pauses``: the pending pauses of
    its owner and of its agent too, as a say's caps count them (``open_pause_columns``); not with
    ``with_pending``."""
    if not rows.on_postgresql():
        conversation = Conversation.objects.filter(pk=conversation_id).first()
        if conversation is None:
            return None
        return OnVersion(
            conversation,
            deployed_version(
                agent_id=conversation.agent_id,
                version=conversation.agent_version,
                environment=conversation.environment,
            ),
        )
    counts = ""
    if with_pending:
        params = [SubjectType.CONVERSATION, PauseStatus.PENDING, conversation_id]
        found = rows.fetch_one(_conversation_version_and_pending_sql(), params)
    else:
        count_params: list[Any] = []
        if with_open_pauses:
            columns, count_params = open_pause_columns(owner=('c."owner_id"', []), agent=('c."agent_id"', []))
            counts = f", {columns}"
        found = rows.fetch_one(_conversation_and_version_sql(counts), [*count_params, conversation_id])
    if found is None:
        return None
    width = rows.width(Conversation) + rows.width(AgentVersion) + rows.width(Agent)
    conversation_values, version_values, agent_values = rows.split(
        found, rows.width(Conversation), rows.width(AgentVersion), rows.width(Agent)
    )
    conversation = rows.instance(Conversation, conversation_values)
    pending = pause_and_owner(found[width:-SEEN_HEAD_WIDTH]) if with_pending else None
    head = seen_head_from(found[-SEEN_HEAD_WIDTH:]) if with_pending else None
    open_pauses = OpenPauses(*found[width:]) if counts else None
    if rows.nothing_in(version_values) or rows.nothing_in(agent_values):
        return OnVersion(conversation, None, pending, open_pauses, head)
    version = rows.instance(AgentVersion, version_values)
    AgentVersion._meta.get_field("agent").set_cached_value(version, rows.instance(Agent, agent_values))
    return OnVersion(conversation, version, pending, open_pauses, head)


def _conversation_and_version_parts() -> tuple[str, str]:
    """The select list and the joins of a conversation with the deployed version it runs on."""
    deployed = _still_deployed_sql(
        agent='c."agent_id"', version='c."agent_version"', environment='c."environment"'
    )
    select = (
        f"{rows.select_list(Conversation, 'c')}, {rows.select_list(AgentVersion, 'v')}, "
        f"{rows.select_list(Agent, 'a')}"
    )
    joins = (
        f"{rows.table(Conversation)} c "
        f'LEFT JOIN {rows.table(AgentVersion)} v ON v."agent_id" = c."agent_id" AND v."version" = c."agent_version" '
        f"AND {deployed} "
        f'LEFT JOIN {rows.table(Agent)} a ON a."id" = v."agent_id" AND a."deleted_at" IS NULL'
    )
    return select, joins


@functools.cache
def _conversation_and_version_sql(counts: str = "") -> str:
    """``counts``: more columns after the three models' (``open_pause_columns``)."""
    select, joins = _conversation_and_version_parts()
    return f'SELECT {select}{counts} FROM {joins} WHERE c."id" = %s'  # nosec B608  # identifiers from model metadata, values are parameters


@functools.cache
def _conversation_version_and_pending_sql() -> str:
    """``_conversation_and_version_sql`` with the conversation's newest pending pause and its owner (the
    one ``approvals.decisions.open_pause_of`` reads), through the index of open pauses per subject, and
    the conversation's audit head, unlocked (``seen_head_join``)."""
    select, joins = _conversation_and_version_parts()
    head, head_join = seen_head_join("h", SubjectType.CONVERSATION.value, 'c."id"')
    return (
        f"SELECT {select}, {pause_with_owner_columns('p', 'u')}, {head} FROM {joins} "  # nosec B608  # identifiers from model metadata, values are parameters
        f"LEFT JOIN LATERAL (SELECT {rows.select_list(Pause, 'q')} FROM {rows.table(Pause)} q "
        f'WHERE q."subject_type" = %s AND q."subject_id" = c."id" AND q."status" = %s '
        f'ORDER BY q."paused_at" DESC LIMIT 1) p ON true '
        f'LEFT JOIN {rows.table(get_user_model())} u ON u."id" = p."owner_id" {head_join} WHERE c."id" = %s'
    )


def deployed_versions(*, agent_id: uuid.UUID | str, environment: str) -> list[int]:
    agent = live_agent(agent_id)
    return list(
        Deployment.objects.filter(agent=agent, environment=_environment(environment))
        .order_by("version")
        .values_list("version", flat=True)
    )
