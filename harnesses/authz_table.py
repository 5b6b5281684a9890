"""The one table of who may do what, as docs/rest-api.md ("Authentication and roles") states it.

Every cell of the authorization matrix (tests/test_authorization_matrix.py for REST,
tests/test_authorization_matrix_surfaces.py for the admin, MCP and Slack, bench/authz_matrix.py at full
size) takes its expected outcome from ``expected`` below, and nowhere else: a rule changes here and in
the docs, together.

An outcome is ``OK`` (the caller passed authorization: a 2xx, or a 409 because the subject is in the
wrong state, which is checked after access), or the refusal's status: 401 (anonymous), 403 (no access;
also a plain user's answer for an id that does not exist: no existence oracle), 404 (an admin or
approver asking for an id that does not exist).
"""

from __future__ import annotations

from typing import Any

OK = "ok"
# "owner" owns the subject; of an approval request it is the person it was made for (``onBehalfOf``).
# "agent" is a service account (role agent): the one that filed the approval request. "other agent" is
# another service account, which someone also made staff and put in the admin and approver groups: no
# role counts for a service account, so it must be refused wherever "agent" is refused and more.
ROLES = ("anonymous", "owner", "other", "staff", "approver", "admin", "agent", "other agent")
ROLE_NAMES = {
    "anonymous": "anonymous",
    "owner": "plain user, owner",
    "other": "plain user, not owner",
    "staff": "staff without role",
    "approver": "approver",
    "admin": "admin",
    "agent": "service account, filer",
    "other agent": "service account, not filer (staff, admin and approver groups too)",
}
PEOPLE = ("owner", "other", "staff", "approver", "admin")
SERVICE_ACCOUNTS = ("agent", "other agent")
# Subject states: a conversation or discussion awaiting a decision, one whose pause was decided, and an
# id that does not exist. "-" for endpoints without a subject. An approval request "decided" is approved
# (and so claimable).
STATES = ("pending", "decided", "unknown")
NO_SUBJECT = "-"

_ANON = {"anonymous": 401}
# A service account may use the approval requests' endpoints only: everywhere else it is refused, 403.
_NO_SERVICE_ACCOUNT = dict.fromkeys(SERVICE_ACCOUNTS, 403)
_UNKNOWN_ID = {
    "anonymous": 401,
    "owner": 403,
    "other": 403,
    "staff": 403,
    "approver": 404,
    "admin": 404,
    **_NO_SERVICE_ACCOUNT,
}

# rule -> role -> outcome, or -> {state: outcome} where the state matters. The rows of the docs' table.
ACCESS: dict[str, dict[str, Any]] = {
    # /healthz, POST /auth/token, /api/schema/, /api/docs/, /metrics (HITL_METRICS_PUBLIC, default true)
    "public": dict.fromkeys(ROLES, OK),
    # read agents, groups, deployment status; start a conversation or discussion; the inboxes (own rows)
    "signed in": {**dict.fromkeys(ROLES, OK), **_ANON, **_NO_SERVICE_ACCOUNT},
    # create, change, delete, deploy, undeploy, import, export agents; groups' writes; secrets; Slack
    # integrations; operator relays
    "admin": {**dict.fromkeys(ROLES, 403), **_ANON, "admin": OK},
    # the audit ledger and its export; the schedule store (reading one schedule: "staff (read)")
    "staff": {
        **_ANON,
        "owner": 403,
        "other": 403,
        "staff": OK,
        "approver": OK,
        "admin": OK,
        **_NO_SERVICE_ACCOUNT,
    },
    "staff (read)": {
        **_ANON,
        "owner": 403,
        "other": 403,
        "staff": OK,
        "approver": OK,
        "admin": OK,
        **_NO_SERVICE_ACCOUNT,
    },
    # say, undo, redo, endConversation; delete a discussion
    "owner or admin": {
        **_ANON,
        "owner": OK,
        "other": 403,
        "staff": 403,
        "approver": 403,
        "admin": OK,
        **_NO_SERVICE_ACCOUNT,
    },
    # resume, cancel, approval-status; a discussion's read, approve, cancel, approval-status
    "decider": {
        **_ANON,
        "owner": OK,
        "other": 403,
        "staff": 403,
        "approver": OK,
        "admin": OK,
        **_NO_SERVICE_ACCOUNT,
    },
    # the snapshot, approval-status?detail=full: an approver only while it awaits approval
    "reads turns": {
        **_ANON,
        "owner": OK,
        "other": 403,
        "staff": 403,
        "approver": {"pending": OK, "decided": 403},
        "admin": OK,
        **_NO_SERVICE_ACCOUNT,
    },
    # /integrations/slack/*: no token counts, only Slack's signature (an unsigned request is 401)
    "signed by Slack": dict.fromkeys(ROLES, 401),
    # --- the admin (docs/admin-inbox.md "Who sees what"): active staff only, anyone else is sent to the
    # login page ("login"); inbox list, its updates, history list, audit list / export / verify
    "admin staff page": {**dict.fromkeys(ROLES, "login"), "staff": OK, "approver": OK, "admin": OK},
    # a pause's decision page (GET, POST), the bulk decision: other staff only their own pauses, and
    # someone else's is the same 404 as an unknown id (an approval request's pause is no staff's own)
    "admin pause": {
        **dict.fromkeys(ROLES, "login"),
        "staff": {"staff's own": OK, "someone else's": 404, "decided": 404, "approval request": 404},
        "approver": OK,
        "admin": OK,
    },
    # --- Slack buttons (docs/slack.md): Slack users are not our accounts. "anonymous" is an unsigned
    # click; "other" a signed click of a Slack user not in hitlApproverUserIds (told so, nothing
    # decided: 403 here); "approver" one in the list (a decided pause answers "already resolved": OK)
    "slack button": {"anonymous": 401, "other": 403, "approver": OK},
    # --- approval requests (approval_requests.selectors): filed by service accounts, decided by reviewers.
    # File one, make the webhook signing secret: service accounts only
    "service account": {**_ANON, **dict.fromkeys(PEOPLE, 403), **dict.fromkeys(SERVICE_ACCOUNTS, OK)},
    # the list: everyone signed in, each sees what is theirs (a service account its own)
    "lists requests": {**dict.fromkeys(ROLES, OK), **_ANON},
    # read one, withdraw it: its service account, the person it was made for, a reviewer
    "request party": {
        **_ANON,
        "owner": OK,
        "other": 403,
        "staff": 403,
        "approver": OK,
        "admin": OK,
        "agent": OK,
        "other agent": 403,
    },
    # decide it: reviewers only, never its person nor any service account
    "request reviewer": {**dict.fromkeys(ROLES, 403), **_ANON, "approver": OK, "admin": OK},
    # claim it, report its outcome: the service account that filed it, no one else
    "request filer": {**dict.fromkeys(ROLES, 403), **_ANON, "agent": OK},
}
SUBJECT_RULES = frozenset(
    {"owner or admin", "decider", "reads turns", "request party", "request reviewer", "request filer"}
)


# The full size's further states: a subject nobody owns (open to admins and approvers only: the "owner"
# role is then just another user; an approval request made for no one), and a HITL job in the schedule store (docs/schedules.md: not listed
# and read as 404 by non-admins; changing, deleting, enabling, disabling or firing it is a 403 for them).
FULL_STATES = ("ownerless", "hitl job")
_HITL_JOB = {
    **_ANON,
    "owner": 403,
    "other": 403,
    "staff": 403,
    "approver": 403,
    "admin": OK,
    **_NO_SERVICE_ACCOUNT,
}
_HITL_JOB_READ = {**_HITL_JOB, "staff": 404, "approver": 404}


# A deciding call (resume, a discussion's approve, an approval request's decision) on a subject whose
# pause is routed to a group none of the roles is in (docs/approvals-routing.md): routing narrows who may
# decide to that group's approvers and admins, so everyone but the admin is refused, 403, whatever else
# their role allows; nothing is consumed.
ROUTED = "routed"
_ROUTED_DECISION = {**dict.fromkeys(ROLES, 403), **_ANON, "admin": OK}


def expected(rule: str, role: str, state: str = NO_SUBJECT) -> Any:
    """The outcome the docs promise ``role`` for an endpoint of ``rule`` on a subject in ``state``."""
    if state == ROUTED:
        return _ROUTED_DECISION[role]
    if state == "unknown" and rule in SUBJECT_RULES:
        return _UNKNOWN_ID[role]
    if state == "hitl job":
        return (_HITL_JOB_READ if rule == "staff (read)" else _HITL_JOB)[role]
    if state == "ownerless":
        role, state = ("other" if role == "owner" else role), "pending"
    outcome = ACCESS[rule][role]
    return outcome[state] if isinstance(outcome, dict) else outcome


def expected_over_mcp(rule: str, role: str, state: str = NO_SUBJECT) -> Any:
    """What ``expected`` says, over MCP (docs/mcp.md): a surface for people, whose token gate refuses a
    service account (403) before any tool, the approval requests' included."""
    return 403 if role in SERVICE_ACCOUNTS else expected(rule, role, state)


def outcome_of(status: int) -> Any:
    """What a response status says about authorization: passed (2xx; 409 wrong state), or the refusal."""
    if 200 <= status < 300 or status == 409:
        return OK
    return status


def markdown_table(cells: list[dict[str, Any]]) -> str:
    """The matrix as a markdown table: one row per (endpoint, state), one column per role; a cell shows
    what happened, and ``expected≠got`` where that differs from the table."""
    rows: dict[tuple[str, str, str], dict[str, str]] = {}
    for cell in cells:
        key = (cell["surface"], cell["endpoint"], cell["state"])
        shown = (
            str(cell["got"]) if cell["got"] == cell["expected"] else f"**{cell['expected']}≠{cell['got']}**"
        )
        rows.setdefault(key, {})[cell["role"]] = shown
    roles = [r for r in ROLES if any(r in row for row in rows.values())]
    lines = [
        "| surface | endpoint | state | " + " | ".join(ROLE_NAMES[r] for r in roles) + " |",
        "|---|---|---|" + "---|" * len(roles),
    ]
    for (surface, endpoint, state), row in rows.items():
        lines.append(
            f"| {surface} | `{endpoint}` | {state} | " + " | ".join(row.get(r, "") for r in roles) + " |"
        )
    return "\n".join(lines)


def differing(cells: list[dict[str, Any]]) -> list[str]:
    return [
        f"{c['surface']} {c['endpoint']} [{c['state']}] as {c['role']}: expected {c['expected']}, got {c['got']}"
        + (f" ({c['detail']})" if c.get("detail") else "")
        for c in cells
        if c["got"] != c["expected"]
    ]
