"""The approval flow end to end: httpx against uvicorn, continuations run by a real django-q2 q-cluster."""

from __future__ import annotations

import json
import threading
from html.parser import HTMLParser
from urllib.parse import urljoin

import httpx
import pytest
from django_q.models import OrmQ, Task

from approvals.models import AuditEntry, Pause
from harnesses.factories import account_bot, slow_account_bot
from harnesses.live_stack import LiveStack, api_user, eventually, running_stack

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]

PROBLEM = "application/problem+json"
CONTINUATION = "approvals.continuation_runs.run_continuation"
REJECTED_TEXT = "This action was rejected by a human reviewer."


def deployed_demo_agent(admin: httpx.Client, document: dict | None = None) -> str:
    created = admin.post("/agentstore/agents", json=document or account_bot())
    assert created.status_code == 201, created.text
    agent_id = created.json()["id"]
    assert created.json()["version"] == 1
    deployed = admin.post(f"/administration/production/deploy/{agent_id}")
    assert deployed.status_code == 200, deployed.text
    return agent_id


def start_conversation(owner: httpx.Client, agent_id: str) -> str:
    started = owner.post(f"/agents/{agent_id}/start")
    assert started.status_code == 201, started.text
    conversation_id = started.json()["conversationId"]
    assert started.headers["Location"] == f"/agents/{conversation_id}"
    assert started.json()["state"] == "READY"
    return conversation_id


def ask_for_deletion(owner: httpx.Client, conversation_id: str) -> None:
    said = owner.post(f"/agents/{conversation_id}", json={"input": "please delete my account"})
    assert said.status_code == 200, said.text
    assert said.json()["state"] == "AWAITING_HUMAN"


def wait_for_state(owner: httpx.Client, conversation_id: str, state: str, timeout: float = 30.0) -> dict:
    def current() -> dict | None:
        body = owner.get(f"/agents/{conversation_id}").json()
        return body if body.get("state") == state else None

    return eventually(current, timeout=timeout, what=f"conversation {conversation_id} to be {state}")


def assert_no_continuation_task() -> None:
    assert not [q for q in OrmQ.objects.all() if q.func() == CONTINUATION]
    assert not Task.objects.filter(func=CONTINUATION).exists()


def expect_continuation_results(expected: list[str]) -> None:
    """The q-cluster's monitor records a task's result after the task committed its own work: poll."""

    def results() -> list[str]:
        return [t.result for t in Task.objects.filter(func=CONTINUATION).order_by("started")]

    try:
        eventually(lambda: results() == expected, timeout=30, what="continuation task results")
    except pytest.fail.Exception:
        pytest.fail(f"continuation task results: expected {expected}, got {results()}")


@pytest.fixture
def paused(people) -> str:
    agent_id = deployed_demo_agent(people["admin"])
    conversation_id = start_conversation(people["alice"], agent_id)
    ask_for_deletion(people["alice"], conversation_id)
    return conversation_id


@pytest.fixture
def slow_paused(people) -> str:
    """Paused on an agent with an httpcalls task: its continuation may be slow, so it is queued."""
    conversation_id = start_conversation(
        people["alice"], deployed_demo_agent(people["admin"], slow_account_bot())
    )
    ask_for_deletion(people["alice"], conversation_id)
    return conversation_id


def test_readme_flow_approval_and_rejection_continue_in_the_deciding_process(people):
    admin, alice, approver = people["admin"], people["alice"], people["approver"]
    agent_id = deployed_demo_agent(admin)
    conversation_id = start_conversation(alice, agent_id)
    ask_for_deletion(alice, conversation_id)

    refused = alice.post(f"/agents/{conversation_id}", json={"input": "hello"})
    assert refused.status_code == 409
    assert refused.headers["Content-Type"].startswith(PROBLEM)
    assert refused.json()["code"] == "WRONG_STATE"
    assert refused.json()["currentState"] == "AWAITING_HUMAN"

    inbox = approver.get("/agents/pending-approvals")
    assert inbox.status_code == 200, inbox.text
    rows = [row for row in inbox.json() if row["conversationId"] == conversation_id]
    assert len(rows) == 1
    assert rows[0]["agentId"] == agent_id
    assert rows[0]["pauseType"] == "RULE"
    assert rows[0]["pauseReason"] == "Account deletion requires manager sign-off"

    approved = approver.post(
        f"/agents/{conversation_id}/resume?wait=20", json={"verdict": "APPROVED", "note": "ok"}
    )
    assert approved.status_code == 200, approved.text
    assert approved.json()["state"] == "READY"
    assert approved.json()["output"] == ["Deletion APPROVED."]
    assert_no_continuation_task()  # the web worker that decided ran it

    ask_for_deletion(alice, conversation_id)
    rejected = approver.post(
        f"/agents/{conversation_id}/resume?wait=20",
        json={"verdict": "rejected", "note": "not without a ticket"},
    )
    assert rejected.status_code == 200, rejected.text
    assert rejected.json()["state"] == "READY"
    assert rejected.json()["output"] == [f"{REJECTED_TEXT} Reason: not without a ticket"]
    assert_no_continuation_task()

    inbox_after = approver.get("/agents/pending-approvals").json()
    assert conversation_id not in [row["conversationId"] for row in inbox_after]
    snapshot = alice.get(f"/agents/{conversation_id}").json()
    assert [step["input"] for step in snapshot["steps"]] == [
        "",
        "please delete my account",
        "please delete my account",
    ]


def test_resume_without_wait_answers_at_once_and_the_continuation_follows(people, paused):
    approver, alice = people["approver"], people["alice"]
    pause_id = str(Pause.objects.get(subject_id=paused).id)

    decided = approver.post(f"/agents/{paused}/resume", json={"verdict": "APPROVED", "note": "ok"})

    assert decided.status_code == 200, decided.text
    assert decided.json() == {
        "conversationId": paused,
        "pauseId": pause_id,
        "verdict": "APPROVED",
        "decidedBy": "approver",
        "state": "IN_PROGRESS",
    }
    finished = wait_for_state(alice, paused, "READY", timeout=15)
    assert finished["output"] == ["Deletion APPROVED."]


def test_twenty_concurrent_approvers_one_wins_nineteen_get_wrong_state(live_stack, people, paused):
    tokens = [api_user(f"approver{i:02d}", "approver") for i in range(20)]
    barrier = threading.Barrier(len(tokens))
    responses: list[httpx.Response | BaseException] = [None] * len(tokens)  # type: ignore[list-item]

    def decide(index: int) -> None:
        with live_stack.client(tokens[index]) as client:
            try:
                barrier.wait(timeout=30)
                responses[index] = client.post(
                    f"/agents/{paused}/resume", json={"verdict": "APPROVED", "note": f"approver {index}"}
                )
            except BaseException as exc:  # reported below, not lost in the thread
                responses[index] = exc

    threads = [threading.Thread(target=decide, args=(i,)) for i in range(len(tokens))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    errors = [r for r in responses if not isinstance(r, httpx.Response)]
    assert not errors, errors
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] + [409] * 19, [(r.status_code, r.text) for r in responses]
    for loser in (r for r in responses if r.status_code == 409):
        assert loser.headers["Content-Type"].startswith(PROBLEM)
        assert loser.json()["code"] == "WRONG_STATE"
        assert loser.json()["currentState"] in ("IN_PROGRESS", "READY")
    [winner] = [r for r in responses if r.status_code == 200]
    finished = wait_for_state(people["alice"], paused, "READY")
    assert finished["output"] == ["Deletion APPROVED."]
    approvals = AuditEntry.objects.filter(conversation_id=paused, verb="hitl.approval")
    assert [e.actor for e in approvals] == [winner.json()["decidedBy"]]
    # the winner's web process ran the (quick) continuation once its answer was sent: nothing was queued
    assert Task.objects.filter(func=CONTINUATION).count() == 0
    assert Pause.objects.get(subject_id=paused).status == "RESOLVED"


def test_continuation_queued_while_no_q_cluster_runs_is_run_by_the_next_one(live_stack, people, slow_paused):
    approver, alice, paused = people["approver"], people["alice"], slow_paused
    pause_id = str(Pause.objects.get(subject_id=paused).id)
    live_stack.stop_qcluster()
    try:
        # without ?wait the continuation is handed to the q-cluster, which is not running
        decided = approver.post(f"/agents/{paused}/resume", json={"verdict": "APPROVED", "note": "ok"})
        assert decided.status_code == 200, decided.text
        assert decided.json()["state"] == "IN_PROGRESS"

        [queued] = [q for q in OrmQ.objects.all() if q.func() == CONTINUATION]
        assert queued.args() == (pause_id,)
        assert alice.get(f"/agents/{paused}").json()["state"] == "IN_PROGRESS"
        assert Pause.objects.get(pk=pause_id).status == "RESOLVING"
    finally:
        live_stack.start_qcluster()

    finished = wait_for_state(alice, paused, "READY")
    assert finished["output"] == ["Deletion APPROVED."]
    assert Pause.objects.get(subject_id=paused).status == "RESOLVED"


class _Assets(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = {"script": "src", "link": "href"}.get(tag)
        for name, value in attrs:
            if name == wanted and value:
                self.urls.append(value)


def test_healthz_answers_json(live_stack):
    with live_stack.client() as anonymous:
        health = anonymous.get("/healthz")
    assert health.status_code == 200
    assert health.headers["Content-Type"].startswith("application/json")
    assert health.json()["status"] == "ok"


def test_openapi_schema_documents_the_approval_endpoints(live_stack):
    with live_stack.client() as anonymous:
        schema = anonymous.get("/api/schema/", params={"format": "json"})
    assert schema.status_code == 200, schema.text
    document = json.loads(schema.text)
    assert document["openapi"].startswith("3.")
    paths = set(document["paths"])
    assert {"/agentstore/agents", "/agents/pending-approvals", "/agents/{conversation_id}"} <= paths
    assert "post" in document["paths"]["/agentstore/agents"]


def test_openapi_schema_documents_the_resume_endpoint(live_stack):
    with live_stack.client() as anonymous:
        document = anonymous.get("/api/schema/", params={"format": "json"}).json()
    resume = [p for p in document["paths"] if p.startswith("/agents/{") and p.endswith("}/resume")]
    assert resume, sorted(document["paths"])
    operation = document["paths"][resume[0]]["post"]
    assert "wait" in [parameter["name"] for parameter in operation.get("parameters", [])]
    assert "/healthz" in document["paths"]


def _swagger_asset_urls(live_stack: LiveStack) -> list[str]:
    with live_stack.client() as anonymous:
        docs = anonymous.get("/api/docs/")
    assert docs.status_code == 200, docs.text
    assert docs.headers["Content-Type"].startswith("text/html")
    parser = _Assets()
    parser.feed(docs.text)
    assert parser.urls, docs.text
    return parser.urls


def test_swagger_ui_references_only_local_assets(live_stack):
    urls = _swagger_asset_urls(live_stack)
    remote = [u for u in urls if u.startswith(("http://", "https://", "//"))]
    assert not remote, remote


def test_swagger_ui_assets_are_served_by_the_live_server(live_stack):
    urls = _swagger_asset_urls(live_stack)
    with live_stack.client() as anonymous:
        statuses = {
            url: anonymous.get(urljoin(live_stack.base_url + "/api/docs/", url)).status_code for url in urls
        }
    assert set(statuses.values()) == {200}, statuses


def test_live_stack_runs_on_the_pytest_database(live_stack):
    """Guard: the processes must share this database, or every other test here proves nothing."""
    token = api_user("probe-owner")
    with live_stack.client(token) as client:
        inbox = client.get("/agents/pending-approvals")
    assert inbox.status_code == 200, inbox.text  # the token exists only in the test database


@pytest.fixture(scope="module")
def qcluster_only_stack(django_db_setup, django_db_blocker, tmp_path_factory):
    yield from running_stack(
        django_db_blocker, tmp_path_factory.mktemp("qcluster-only"), HITL_CONTINUE_INLINE="false"
    )


def test_a_q_cluster_only_deployment_continues_on_the_q_cluster(qcluster_only_stack):
    """HITL_CONTINUE_INLINE=false: the web process runs no continuation; ?wait waits for the q-cluster."""
    admin = qcluster_only_stack.client(api_user("admin", "admin"))
    alice = qcluster_only_stack.client(api_user("alice"))
    approver = qcluster_only_stack.client(api_user("approver", "approver"))
    conversation_id = start_conversation(alice, deployed_demo_agent(admin))
    ask_for_deletion(alice, conversation_id)
    approved = approver.post(f"/agents/{conversation_id}/resume?wait=20", json={"verdict": "APPROVED"})
    assert approved.status_code == 200, approved.text
    assert approved.json()["state"] == "READY" and approved.json()["output"] == ["Deletion APPROVED."]
    expect_continuation_results(["continued"])  # run by the q-cluster
    for client in (admin, alice, approver):
        client.close()
