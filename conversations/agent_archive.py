"""ZIP export and import of agent documents; an import is validated whole before anything is saved."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

from django.db import transaction

from common.errors import BadRequest
from conversations.agents import agent_version, create_agent, report_or_raise
from conversations.models import AgentVersion

MAX_ARCHIVE_BYTES = 20 * 1024 * 1024
MAX_MEMBERS = 500


def export_agent(*, agent_id: str, version: int | None) -> tuple[str, bytes]:
    row = agent_version(agent_id, version)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(
            f"{row.agent_id}.v{row.version}.json",
            json.dumps(row.document, indent=2, ensure_ascii=False),
        )
    return f"agent-{row.agent_id}-v{row.version}.zip", buffer.getvalue()


def _read_documents(data: bytes) -> list[tuple[str, Any]]:
    if len(data) > MAX_ARCHIVE_BYTES:
        raise BadRequest("the archive is too large", errors=[{"field": "file", "message": "over 20 MiB"}])
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise BadRequest(
            "the body is not a ZIP archive", errors=[{"field": "file", "message": "not a ZIP"}]
        ) from None
    members = [m for m in archive.infolist() if not m.is_dir() and m.filename.endswith(".json")]
    if not members:
        raise BadRequest(
            "the archive holds no .json agent documents", errors=[{"field": "file", "message": "empty"}]
        )
    if len(members) > MAX_MEMBERS:
        raise BadRequest(
            "the archive holds too many documents", errors=[{"field": "file", "message": "too many"}]
        )
    documents = []
    for member in members:
        if member.file_size > MAX_ARCHIVE_BYTES:
            raise BadRequest(
                f"{member.filename}: too large",
                errors=[{"file": member.filename, "field": "", "message": "too large"}],
            )
        try:
            documents.append((member.filename, json.loads(archive.read(member).decode("utf-8"))))
        except (
            UnicodeDecodeError,
            json.JSONDecodeError,
            RecursionError,
        ) as exc:  # RecursionError: nested too deep
            raise BadRequest(
                f"{member.filename}: not valid JSON ({exc})",
                errors=[{"file": member.filename, "field": "", "message": f"not valid JSON: {exc}"}],
            ) from None
    return documents


def import_agents(*, data: bytes, created_by: Any = None) -> list[AgentVersion]:
    """All documents are validated first; one bad document means nothing of the archive is imported."""
    documents = _read_documents(data)
    errors: list[dict[str, str]] = []
    for filename, document in documents:
        try:
            report_or_raise(document, file=filename)
        except BadRequest as exc:
            errors.extend(exc.extra["errors"])
    if errors:
        first = errors[0]
        raise BadRequest(f"{first['file']}: {first['field']}: {first['message']}", errors=errors)
    with transaction.atomic():
        return [create_agent(document=document, created_by=created_by) for _, document in documents]
