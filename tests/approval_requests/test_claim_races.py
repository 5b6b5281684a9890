"""At most one grant per approval and one request per idempotency key, under real races: real threads, each
on its own PostgreSQL connection, through the REST views (harnesses/claim_races.py). Fast size here;
``bench/claim_races.py`` runs the ``fullsize`` test: more rounds, 16 threads."""

from __future__ import annotations

import os
from collections import Counter

import pytest

from harnesses.claim_races import Round, claim_round, filing_round, outcome_round
from harnesses.users import make_user

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 8
ROUNDS = int(os.environ.get("CLAIM_RACE_ROUNDS", "4"))


@pytest.fixture
def people(db):
    return {
        "agent": make_user("refund-bot", "agent"),
        "reviewer": make_user("approver", "approver"),
        "person": make_user("bob"),
    }


def _held(rounds: list[Round]) -> None:
    """Print each kind's answers over its rounds; fail on any round that broke its rule."""
    by_kind: dict[str, Counter] = {}
    for judged in rounds:
        by_kind.setdefault(judged.kind, Counter())["rounds"] += 1
        by_kind[judged.kind].update(judged.tally)
    broken = [f"{r.kind}: {'; '.join(r.problems)} ({dict(r.tally)})" for r in rounds if r.problems]
    for kind, tally in by_kind.items():
        print(f"claim races, {kind}: {dict(tally)}")
    print(f"claim races: {len(rounds)} rounds, {len(broken)} breaking their rule")
    assert broken == [], "\n".join(broken)


@pytest.mark.parametrize("pinned", [False, True], ids=["unpinned", "pinned"])
def test_claims_of_one_approval_race_one_grant_the_rest_outcome_unknown(people, pinned):
    _held(
        [
            claim_round(
                people["agent"], people["reviewer"], people["person"], claimers=THREADS, pinned=pinned
            )
            for _ in range(ROUNDS)
        ]
    )


def test_claims_racing_the_outcome_report_are_never_granted_again(people):
    _held(
        [
            claim_round(
                people["agent"], people["reviewer"], people["person"], claimers=THREADS, with_outcome=True
            )
            for _ in range(ROUNDS)
        ]
    )


def test_claims_racing_a_withdrawal_grant_nothing_if_it_won(people):
    """In odd rounds the withdrawal starts up to 100 ms ahead of the claims, so it wins some rounds."""
    rounds = [
        claim_round(
            people["agent"],
            people["reviewer"],
            people["person"],
            claimers=THREADS,
            with_withdrawal=True,
            withdrawal_ahead=0.1 * (i % 2),
        )
        for i in range(ROUNDS * 2)
    ]
    print(f"the withdrawal won {sum(r.won_by('withdrawal') for r in rounds)} of {len(rounds)} rounds")
    _held(rounds)


def test_different_outcome_reports_race_the_first_stands(people):
    _held([outcome_round(people["agent"], people["reviewer"], reporters=THREADS) for _ in range(ROUNDS)])


@pytest.mark.parametrize("variants", [1, 2, THREADS], ids=["same body", "two bodies", "every body different"])
def test_filings_with_one_idempotency_key_race_one_request(people, variants):
    _held([filing_round(people["agent"], filers=THREADS, variants=variants) for _ in range(ROUNDS)])


@pytest.mark.fullsize
def test_claim_and_filing_races_full_size(people):
    rounds_each, threads = int(os.environ.get("CLAIM_RACE_FULL_ROUNDS", "50")), 16
    agent, reviewer, person = people["agent"], people["reviewer"], people["person"]
    rounds = []
    for i in range(rounds_each):
        rounds.append(claim_round(agent, reviewer, person, claimers=threads, pinned=bool(i % 2)))
        rounds.append(claim_round(agent, reviewer, person, claimers=threads, with_outcome=True))
        rounds.append(claim_round(agent, reviewer, person, claimers=threads, with_withdrawal=True))
        rounds.append(outcome_round(agent, reviewer, reporters=threads))
        rounds.append(filing_round(agent, filers=threads, variants=1 + i % 3))
    _held(rounds)
