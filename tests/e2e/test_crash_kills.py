"""Crash safety under random SIGKILLs of web and q-cluster process groups (docs/reliability.md, R3).

Driver threads run approval cycles (a rule pause whose approved continuation calls the recorder, then a
gated tool call that calls it again) over HTTP while a seeded killer SIGKILLs whole process groups — a
uvicorn, a default q-cluster or a timer q-cluster — and starts a new one in its place; the drivers
retry what failed. Then: no pause lost (each one decided, every restore decided again exactly once),
no request reached the recorder twice, every conversation takes a turn again, and each driver's
conversation took one within 30 s of each kill. The harness is harnesses/crash_kills.py.

Fast size here (10 kills; 1 web, 1 default and 1 timer q-cluster); full size with
``HITL_CRASH_KILLS``/``HITL_CRASH_WEBS``/``HITL_CRASH_CLUSTERS`` through bench/crash_kills.py.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from django.conf import settings

from approvals.models import AuditEntry, Pause, PauseStatus
from conversations.models import Conversation
from harnesses.crash_kills import (
    CRASH_ENV,
    USABLE_WITHIN_SECONDS,
    CrashRun,
    Fleet,
    Recorder,
    crash_agent,
    run_crash_kills,
)
from harnesses.factories import deployed_agent
from harnesses.live_stack import api_user, database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]

SEED = int(os.environ.get("HITL_CRASH_SEED", "16"))


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    server = Recorder().start()
    yield server
    server.stop()


def fleet_on_the_test_database(tmp_path) -> Fleet:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hitl_project.settings.test",
        "DATABASE_URL": database_url(),
        "HITL_Q_SYNC": "false",
        "PYTHONUNBUFFERED": "1",
        **CRASH_ENV,
    }
    return Fleet(env=env, log_dir=tmp_path, timer_cluster=settings.HITL_TIMER_CLUSTER)


def crash_run(tmp_path, recorder: Recorder, *, kills: int, webs: int, clusters: int, drivers: int):
    fleet = fleet_on_the_test_database(tmp_path)
    agent_id = deployed_agent(crash_agent(recorder.url))
    owner, approver = api_user("alice"), api_user("approver", "approver")
    try:
        booting = time.monotonic()
        fleet.start(webs=webs, clusters=clusters)
        print(f"\nfleet started in {time.monotonic() - booting:.1f} s")
        run = run_crash_kills(
            fleet=fleet,
            recorder=recorder,
            agent_id=agent_id,
            owner_token=owner,
            approver_token=approver,
            seed=SEED,
            kills=kills,
            drivers=drivers,
        )
        report = check_after_the_kills(run, agent_id, owner, approver)
    except BaseException:
        print(fleet.output())
        raise
    finally:
        fleet.stop()
    return run, report


def settled(agent_id: str, deadline: float) -> None:
    """Wait until no pause of the agent is RESOLVING and no conversation IN_PROGRESS (recovery's job)."""
    while True:
        busy = Pause.objects.filter(agent_id=agent_id, status=PauseStatus.RESOLVING).count()
        busy += Conversation.objects.filter(agent_id=agent_id, state="IN_PROGRESS").count()
        if not busy:
            return
        if time.monotonic() > deadline:
            stuck = list(
                Pause.objects.filter(agent_id=agent_id, status=PauseStatus.RESOLVING).values(
                    "id", "lease_until", "decided_at"
                )
            )
            raise AssertionError(f"lost: still RESOLVING or IN_PROGRESS after the last kill: {stuck}")
        time.sleep(0.2)


def check_after_the_kills(run: CrashRun, agent_id: str, owner: str, approver: str) -> dict:
    assert run.killer.error is None, run.killer.error
    errors = [driver.error for driver in run.drivers if driver.error]
    assert errors == [], errors
    assert [d.index for d in run.drivers if d.thread.is_alive()] == [], "drivers still running"
    last_kill = max(kill.at for kill in run.killer.done)
    settled(agent_id, last_kill + USABLE_WITHIN_SECONDS)

    # 0 lost pauses: each one decided, or pending and decidable; each restore decided again, once
    pauses = list(Pause.objects.filter(agent_id=agent_id))
    decidable = [p for p in pauses if p.status == PauseStatus.PENDING]
    urls = run.fleet.web_urls()
    with httpx.Client(base_url=urls[0], timeout=30.0) as http:
        for pause in decidable:
            answer = http.post(
                f"/agents/{pause.subject_id}/resume?wait=20",
                headers={"Authorization": f"Token {approver}"},
                json={"verdict": "APPROVED"},
            )
            assert answer.status_code == 200, answer.text
    lost = [p.id for p in Pause.objects.filter(agent_id=agent_id).exclude(status=PauseStatus.RESOLVED)]
    assert lost == [], f"lost pauses: {lost}"
    verbs = Counter(
        (entry.pause_id, entry.verb)
        for entry in AuditEntry.objects.filter(
            pause_id__in=[p.id for p in pauses], verb__in=["hitl.approval", "hitl.restored"]
        )
    )
    for pause in pauses:
        approvals, restores = verbs[(pause.id, "hitl.approval")], verbs[(pause.id, "hitl.restored")]
        assert approvals == restores + 1, (pause.id, approvals, restores)

    # 0 double requests: every request the recorder saw carries a token of one say
    assert run.recorder.sent_twice() == {}, f"sent twice: {run.recorder.sent_twice()}"

    # every conversation takes a turn again (those whose start answer was lost by a kill too)
    conversations = list(Conversation.objects.filter(agent_id=agent_id).values_list("id", flat=True))
    with httpx.Client(base_url=urls[0], timeout=30.0) as http:
        for conversation_id in conversations:
            hello = http.post(
                f"/agents/{conversation_id}",
                headers={"Authorization": f"Token {owner}"},
                json={"input": "hello"},
            )
            assert hello.status_code == 200 and hello.json()["state"] == "READY", hello.text

    # no approved turn failed: a continuation is finished or restored, never failed by a crash elsewhere
    failed = list(
        AuditEntry.objects.filter(subject_id__in=conversations, verb="hitl.continuation.failed").values_list(
            "pause_id", "detail"
        )
    )
    assert failed == [], f"continuations failed: {failed}"

    usable = run.times_to_usable()
    assert max(usable) <= USABLE_WITHIN_SECONDS, f"times to usable after each kill: {usable}"
    verbs_seen = Counter(
        AuditEntry.objects.filter(
            subject_id__in=conversations,
            verb__in=["hitl.step.outcome_unknown", "hitl.tool.outcome_unknown", "hitl.turn.interrupted"],
        ).values_list("verb", flat=True)
    )
    unknown = verbs_seen["hitl.step.outcome_unknown"] + verbs_seen["hitl.tool.outcome_unknown"]
    kinds = Counter(kill.kind for kill in run.killer.done)
    aimed_at = Counter(kill.path.split("/")[1] for kill in run.killer.done if kill.aimed)
    report = {
        "kills": len(run.killer.done),
        "by target": dict(sorted(kinds.items())),
        "aimed": sum(kill.aimed for kill in run.killer.done),
        "aimed at": dict(sorted(aimed_at.items())),
        "cycles": sum(d.cycles_done for d in run.drivers),
        "conversations": len(conversations),
        "pauses": len(pauses),
        "restored": sum(verbs[(p.id, "hitl.restored")] for p in pauses),
        "interrupted turns": verbs_seen["hitl.turn.interrupted"],
        "pending at the end": len(decidable),
        "requests": len(run.recorder.received),
        "outcome unknown": unknown,
        "max time to usable": max(usable),
    }
    phases = ", ".join(f"{phase} {seconds:.0f} s" for phase, seconds in run.phases.items())
    print(
        f"\nR3 crash kills: {report['kills']} kills {report['by target']} "
        f"({report['aimed']} mid-call: {report['aimed at']}), {report['cycles']} cycles, "
        f"{len(conversations)} conversations, {len(pauses)} pauses ({report['restored']} restored, "
        f"{len(decidable)} pending at the end, {report['interrupted turns']} turns interrupted), lost 0, "
        f"{report['requests']} requests, sent twice 0, outcome unknown {unknown}, failed continuations 0, "
        f"max time to usable {max(usable):.1f} s, elapsed {run.elapsed:.0f} s ({phases})"
    )
    return report


def test_random_sigkills_of_web_and_q_clusters_lose_no_pause_send_nothing_twice_and_recover_within_30s(
    django_db_setup, tmp_path, recorder: Recorder
):
    run, report = crash_run(tmp_path, recorder, kills=10, webs=1, clusters=1, drivers=2)
    assert report["kills"] == 10
    assert report["cycles"] >= len(run.drivers)


@pytest.mark.fullsize
def test_crash_kills_full_size(django_db_setup, tmp_path, recorder: Recorder):
    """bench/crash_kills.py: 30 kills over 2 webs and 2 q-clusters of each kind by default."""
    run, report = crash_run(
        tmp_path,
        recorder,
        kills=int(os.environ.get("HITL_CRASH_KILLS", "30")),
        webs=int(os.environ.get("HITL_CRASH_WEBS", "2")),
        clusters=int(os.environ.get("HITL_CRASH_CLUSTERS", "2")),
        drivers=int(os.environ.get("HITL_CRASH_DRIVERS", "3")),
    )
    assert report["kills"] == int(os.environ.get("HITL_CRASH_KILLS", "30"))
