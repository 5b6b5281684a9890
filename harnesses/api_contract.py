"""The API contract harness (docs/reliability.md, R6): schemathesis with every check over /api/schema/, every role.

A real threaded WSGI server on loopback serves the project (the pytest test database: callers must use
``transactional_db``, the server's threads see only committed rows); schemathesis' engine loads the
schema from it and runs its phases (examples, coverage, fuzzing, stateful) once per role's token, with
every check on (what ``--checks all`` turns on). ``run_contract`` returns what was sent and every
failure; ``ContractReport.summary()`` is the readable account a failing test prints.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.core.handlers.wsgi import WSGIHandler
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
from rest_framework.authtoken.models import Token

from harnesses.users import make_user

# anonymous, then the five kinds of signed-in caller of docs/rest-api.md's table ("owner" and "other" are
# both plain users: the generated ids belong to no one, so one plain user stands for both; "agent" is a
# service account, the only caller whose filings reach the body of POST /approval-requests)
ROLES = ("anonymous", "user", "staff", "approver", "admin", "agent")
# what each role may always read: a token refused after its run would have made every answer a 401
TOKEN_CHECK = {"agent": "/approval-requests"}


class _QuietHandler(WSGIRequestHandler):
    def setup(self) -> None:
        super().setup()
        # wsgiref writes the headers and the body in two sends: with Nagle's algorithm on, a kept-alive
        # connection waits for the client's delayed ACK (~40 ms) on every response
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def parse_request(self) -> bool:
        # One request per connection: wsgiref cannot read a chunked body, and what it leaves unread would
        # be parsed as the next request on a kept-alive connection (an HTTP/0.9 error page, no status line).
        parsed = super().parse_request()
        self.close_connection = True
        return parsed

    def log_message(self, format: str, *args: Any) -> None:  # the base class's name
        return None


@contextmanager
def live_wsgi_server() -> Iterator[str]:
    """The project's WSGI application on a threaded server on 127.0.0.1 (an ephemeral port); yields its URL."""
    server = ThreadedWSGIServer(("127.0.0.1", 0), _QuietHandler, allow_reuse_address=False)
    server.set_app(WSGIHandler())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextmanager
def live_asgi_server() -> Iterator[str]:
    """The project's ASGI application as uvicorn serves it (Django behind the ``/mcp`` dispatch of
    mcp_surface/asgi.py) on uvicorn in a thread on 127.0.0.1 (an ephemeral port); yields its URL."""
    import uvicorn
    from django.core.asgi import get_asgi_application

    from mcp_surface.asgi import with_mcp

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    config = uvicorn.Config(with_mcp(get_asgi_application()), log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        if not server.started:
            raise RuntimeError("uvicorn did not start within 30 s")
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        listener.close()


def role_tokens() -> dict[str, str | None]:
    """One committed user per role (make_user: staff for every role but ``user``); ``anonymous`` has None."""
    tokens: dict[str, str | None] = {"anonymous": None}
    for role in ROLES[1:]:
        user = make_user(f"contract-{role}", role)
        tokens[role] = Token.objects.get(user=user).key
    return tokens


@dataclass(frozen=True)
class ContractFailure:
    role: str
    check: str
    operation: str
    title: str
    message: str
    request: str
    status: int | None
    sent: str = ""
    answer: str = ""


@dataclass
class ContractReport:
    """What a run sent and every failure; ``summary()`` groups the failures into one line per kind."""

    roles: list[str] = field(default_factory=list)
    requests: int = 0
    requests_by_role: Counter[str] = field(default_factory=Counter)
    operations: set[str] = field(default_factory=set)
    failures: list[ContractFailure] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    @property
    def clean(self) -> bool:
        return not self.failures and not self.errors and self.requests > 0

    def failures_by_check(self) -> Counter[str]:
        return Counter(failure.check for failure in self.failures)

    def summary(self, limit: int = 40) -> str:
        by_role = ", ".join(f"{role} {self.requests_by_role[role]}" for role in self.roles)
        lines = [
            f"R6 contract: {len(self.roles)} roles x {len(self.operations)} operations, {self.requests} requests "
            f"({by_role}), {len(self.failures)} failures, {len(self.errors)} errors, {self.elapsed:.1f} s",
        ]
        lines += [f"  {check}: {count}" for check, count in self.failures_by_check().most_common()]
        kinds: dict[tuple[str, str, str, int | None], list[ContractFailure]] = {}
        for failure in self.failures:
            kinds.setdefault((failure.check, failure.operation, failure.title, failure.status), []).append(
                failure
            )
        for (check, operation, title, status), failures in list(kinds.items())[:limit]:
            first = failures[0]
            roles = ",".join(sorted({failure.role for failure in failures}))
            message = " ".join(first.message.split())[:240]
            lines.append(
                f"  FAIL {check} {operation} -> {status} [{roles}] x{len(failures)}: {title}. {message} "
                f"(e.g. {first.request} {first.sent} -> {first.answer})"
            )
        if len(kinds) > limit:
            lines.append(f"  ... and {len(kinds) - limit} more kinds of failure")
        lines += [f"  ERROR {error}" for error in self.errors[:limit]]
        return "\n".join(lines)


# Accepted exceptions, each for the operations and the one check it concerns (docs/reliability.md, R6).
# A schema cannot state the whole-document rules of these bodies (a valid agent or group document, a
# function on the allow-list, exactly one of agentId and groupId, a ${vault:NAME} that exists): a random
# schema-valid body is refused with a 400 naming the field, which is the contract.
BUSINESS_RULE_BODIES = [
    "POST /agentstore/agents",
    "PUT /agentstore/agents/{agent_id}",
    "POST /backup/import",
    "POST /groupstore/groups",
    "PUT /groupstore/groups/{group_id}",
    "POST /schedulestore/schedules",
    "PUT /schedulestore/schedules/{schedule_id}",
    "POST /integrationstore/slack",
    "PUT /integrationstore/slack/{name}",
    # an agent trigger: each agentId names an existing agent, and a PUT's intent, if given, is the path's
    "POST /AgentTriggerStore/agenttriggers",
    "PUT /AgentTriggerStore/agenttriggers/{intent}",
    # onBehalfOf names an active user; the pinned request is checked whole (an absolute http(s) URL
    # without credentials, header names, secretHeaders among the headers); a finite policy needs its
    # duration; a key, name or reason of blanks is refused
    "POST /approval-requests",
]
# Whether a claim carries the request about to be sent depends on the approval request (pinned or not):
# a schema-valid body may be the 400 that names ``request``.
CLAIM_BODIES = ["POST /approval-requests/{request_id}/claim"]
# A decision's fields depend on each other (guidance only with REJECTED and then a note, toolDecisions
# only for a tool-call pause): an OpenAPI 3.0 schema cannot say it, the 400 names each field.
DECISION_BODIES = [
    "POST /agents/{conversation_id}/resume",
    "POST /groups/{group_id}/conversations/{discussion_id}/approve",
    "POST /approval-requests/{request_id}/decision",
]
# Lenient by design: enable reads a body that is not an object as no body, which sets no count
# (schedules/api/views.py, ScheduleEnableInput). Query parameters are not lenient: a value that is not of
# the parameter's type, an empty typed one or a repeated one is a 400 naming it (common/query_params.py).
LENIENT_BODIES = ["POST /schedulestore/schedules/{schedule_id}/enable"]
# RFC 3339 allows UTC offsets up to 23:59; the audit filters refuse beyond 15:59 (PostgreSQL's range) with
# a 400 naming the field.
AUDIT_FILTERS = ["GET /audit/entries", "GET /audit/export"]
PHASES_FAST = ("examples", "fuzzing")
PHASES_FULL = ("examples", "coverage", "fuzzing", "stateful")


def config_headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Token {token}"}


def contract_config(
    *,
    token: str | None,
    base_url: str,
    max_examples: int,
    seed: int,
    phases: tuple[str, ...],
    path_regex: str | None = None,
) -> Any:
    """schemathesis' configuration of one role's run; ``path_regex``: every other operation disabled."""
    import schemathesis

    def operations(labels: list[str], check: str) -> list[dict[str, Any]]:
        return [{"include-name": label, "checks": {check: {"enabled": False}}} for label in labels]

    data: dict[str, Any] = {
        "base-url": base_url,
        "seed": seed,
        # NUL is refused in every string (PostgreSQL cannot store it; docs/rest-api.md "Every bad body")
        "generation": {"max-examples": max_examples, "database": "none", "allow-x00": False},
        "phases": {name: {"enabled": name in phases} for name in PHASES_FULL},
        "request-timeout": 30,
        # no state kept between runs (a shared directory would be shared by pytest-xdist's processes)
        "cache": {"enabled": False},
        "suppress-health-check": ["all"],
        "warnings": False,
        "operations": operations(
            BUSINESS_RULE_BODIES + CLAIM_BODIES + DECISION_BODIES + AUDIT_FILTERS, "positive_data_acceptance"
        )
        + operations(LENIENT_BODIES, "negative_data_rejection"),
    }
    if path_regex is not None:
        data["operations"].append({"exclude-path-regex": path_regex, "enabled": False})
    if token is not None:
        data["headers"] = config_headers(token)
    return schemathesis.Config.from_dict(data)


def run_contract(
    *,
    base_url: str,
    tokens: dict[str, str | None],
    max_examples: int,
    phases: tuple[str, ...] = PHASES_FAST,
    seed: int = 16,
    path_regex: str | None = None,
) -> ContractReport:
    """``path_regex``: only the operations whose path it matches."""
    import requests
    import schemathesis
    from schemathesis.core.errors import LoaderError
    from schemathesis.engine import events, from_schema

    report = ContractReport()
    started = time.monotonic()
    for role, token in tokens.items():
        report.roles.append(role)
        config = contract_config(
            token=token,
            base_url=base_url,
            max_examples=max_examples,
            seed=seed,
            phases=phases,
            path_regex=path_regex,
        )
        try:
            schema = schemathesis.openapi.from_url(f"{base_url}/api/schema/?format=json", config=config)
        except LoaderError as error:  # e.g. the role's token refused: the other roles still run
            report.errors.append(f"[{role}] the schema did not load: {error.message}")
            continue
        for event in from_schema(schema).execute():
            if isinstance(event, events.ScenarioFinished):
                _record(report, role, event.recorder)
            elif isinstance(event, events.NonFatalError):
                report.errors.append(f"[{role}] {event.label}: {event.info.title}: {event.value!r}")
            elif isinstance(event, events.FatalError):
                report.errors.append(f"[{role}] fatal: {event.exception!r}")
        if token is not None:  # a token refused after the run would have made every answer a 401
            answer = requests.get(
                base_url + TOKEN_CHECK.get(role, "/agents/pending-approvals"),
                headers=config_headers(token),
                timeout=30,
            )
            if answer.status_code != 200:
                report.errors.append(
                    f"[{role}] the role's token was refused after its run ({answer.status_code})"
                )
    report.elapsed = time.monotonic() - started
    return report


def _record(report: ContractReport, role: str, recorder: Any) -> None:
    def label_of(case_id: str) -> str:
        node = recorder.cases.get(case_id)
        return node.value.operation.label if node is not None else recorder.label

    for case_id, interaction in recorder.interactions.items():
        if interaction.response is not None:
            report.requests += 1
            report.requests_by_role[role] += 1
            report.operations.add(label_of(case_id))
    for case_id, checks in recorder.checks.items():
        for check in checks:
            if check.failure_info is None:
                continue
            failure = check.failure_info.failure
            interaction = recorder.interactions.get(failure.case_id or case_id)
            request, sent, answer, status = "?", "", "", None
            if interaction is not None:
                request = f"{interaction.request.method} {interaction.request.uri}"
                sent = _excerpt(interaction.request.body)
                if interaction.response is not None:
                    status = interaction.response.status_code
                    answer = _excerpt(interaction.response.content)
            report.failures.append(
                ContractFailure(
                    role=role,
                    check=check.name,
                    operation=label_of(failure.case_id or case_id),
                    title=failure.title,
                    message=failure.message,
                    request=request,
                    status=status,
                    sent=sent,
                    answer=answer,
                )
            )


def _excerpt(body: bytes | None, limit: int = 200) -> str:
    text = (body or b"").decode("utf-8", "replace")
    return text if len(text) <= limit else text[:limit] + "..."
