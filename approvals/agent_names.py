"""Agent names for the reviewer's pages, from the layer that owns agents.

A pause keeps only its agent's id and version (``Pause.agent_id``, ``agent_version``): the agent lives in
conversations/, a layer above this one, so the core cannot read its table. conversations/ registers an
``AgentDirectory`` in ``AppConfig.ready()``; the admin inbox asks it for the names of a whole page of
agents at once (an annotation of the page's own query, never one per row) and for the ids of agents whose name matches a search.
Names are read live, so a renamed agent shows its current name on pauses opened before the rename.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Protocol

from django.db.models import CharField, Expression, OuterRef, QuerySet, Value
from django.db.models.functions import Coalesce

NAMED_LIKE_LIMIT = 500  # agents a search word may match; more is a word too vague to search by


class AgentDirectory(Protocol):
    def names_of(self, agent_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The current name of each known agent among ``agent_ids``, in one query."""

    def name_of_agent(self, agent_id: OuterRef) -> Expression:
        """A scalar subquery: the name of the agent whose id is ``agent_id`` (an outer reference)."""

    def agent_rows(self) -> QuerySet:
        """The agents, unevaluated, each annotated with ``agent_name``: the core narrows and shapes it into
        a part of one of its own queries (approvals.admin.lookups), so a page asks once, not per directory."""


_DIRECTORIES: list[AgentDirectory] = []


def register_agent_directory(directory: AgentDirectory) -> None:
    _DIRECTORIES.append(directory)


def agent_names(agent_ids: Iterable[uuid.UUID | None] | QuerySet) -> dict[uuid.UUID, str]:
    """Names of the given agents (unknown or None ids are left out): one query per registered directory.

    ``agent_ids`` may be an unevaluated ``values_list`` queryset: it is then a subquery of that one query."""
    if not isinstance(agent_ids, QuerySet):
        agent_ids = {agent_id for agent_id in agent_ids if agent_id is not None}
        if not agent_ids:
            return {}
    names: dict[uuid.UUID, str] = {}
    for directory in _DIRECTORIES:
        names.update(directory.names_of(agent_ids))
    return names


def agent_name_expression() -> Expression:
    """The current name of a pause's agent as an annotation (``Pause.agent_id`` is the outer reference),
    so a page of pauses carries its agents' names in its own query; NULL when no directory knows it."""
    found = [directory.name_of_agent(OuterRef("agent_id")) for directory in _DIRECTORIES]
    if not found:
        return Value(None, output_field=CharField())
    return found[0] if len(found) == 1 else Coalesce(*found)


def agent_row_querysets() -> list[QuerySet]:
    """Each registered directory's agents (``AgentDirectory.agent_rows``), for a query that combines them."""
    return [directory.agent_rows() for directory in _DIRECTORIES]
