"""The hot path's hand-written SQL (common.rows) reads and writes what the ORM would.

Each read is run twice on the same PostgreSQL rows: once by its SQL, once by the ORM code it replaces
(the path the SQLite fallback takes, chosen here by ``on_postgresql``), and the two must agree field by
field. The writes are checked against what a fresh ORM read finds.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS, DataError, connection, transaction
from django.db.backends.utils import CursorDebugWrapper
from django.db.models.signals import post_init
from django.db.utils import ConnectionHandler
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token

from approvals.authentication import TokenWithRolesAuthentication
from approvals.decisions import open_pause_of, pause_with_owner
from approvals.models import Pause, PauseStatus, SubjectType
from approvals.pause_caps import OpenPauses, counted_pending_pauses, open_pause_counts
from common import rows
from conversations.agents import (
    conversation_and_its_version,
    create_agent,
    delete_agent,
    deploy_agent,
    deployed_version,
    find_on_version,
    newest_deployed_version,
    newest_deployed_version_and_open_pauses,
    undeploy_agent,
    update_agent,
)
from conversations.models import Conversation, ConversationStep
from conversations.selectors import _find
from conversations.step_store import newest_steps
from harnesses.factories import account_bot, deployed_agent, say, start

pytestmark = pytest.mark.django_db


def fields_of(instance) -> dict:
    if instance is None:
        return {}
    return {
        field.attname: getattr(instance, field.attname)
        for field in type(instance)._meta.concrete_fields
        if field.attname in instance.__dict__
    }


def by_sql_and_by_orm(monkeypatch, read):
    by_sql = read()
    with monkeypatch.context() as patched:
        patched.setattr(rows, "on_postgresql", lambda: False)
        by_orm = read()
    return by_sql, by_orm


def paused_conversation(client) -> str:
    conversation_id = start(client, deployed_agent())
    say(client, conversation_id, "please delete my account")
    return conversation_id


def test_a_conversation_read_by_sql_is_the_one_the_orm_reads(monkeypatch, alice_client):
    conversation_id = paused_conversation(alice_client)
    by_sql, by_orm = by_sql_and_by_orm(monkeypatch, lambda: _find(conversation_id))
    assert fields_of(by_sql) == fields_of(by_orm) and by_sql.properties == by_orm.properties
    assert not by_sql._state.adding and by_sql._state.db == "default"
    assert _find("00000000-0000-0000-0000-000000000000") is None


def test_the_pending_pause_and_its_owner_by_sql_are_the_ones_the_orm_reads(monkeypatch, alice_client, alice):
    conversation_id = paused_conversation(alice_client)
    by_sql, by_orm = by_sql_and_by_orm(
        monkeypatch, lambda: open_pause_of(SubjectType.CONVERSATION, Conversation.objects.get().pk)
    )
    assert fields_of(by_sql) == fields_of(by_orm) and by_sql.bookmark == by_orm.bookmark
    assert by_sql.owner == alice and fields_of(by_sql.owner) == fields_of(by_orm.owner)
    by_id, by_id_orm = by_sql_and_by_orm(monkeypatch, lambda: pause_with_owner(by_sql.pk))
    assert fields_of(by_id) == fields_of(by_orm) == fields_of(by_id_orm) and by_id.owner == alice
    Pause.objects.update(owner=None)
    by_sql, by_orm = by_sql_and_by_orm(
        monkeypatch, lambda: open_pause_of(SubjectType.CONVERSATION, conversation_id)
    )
    assert by_sql.owner is None and by_orm.owner is None  # an ownerless pause: the LEFT JOIN found no one


@pytest.mark.parametrize("caps", [(100, 1000), (2, 2), (1, 0), (0, 5), (0, 0)])
def test_the_open_pause_counts_by_sql_are_the_ones_the_orm_counts(monkeypatch, alice_client, alice, caps):
    agent = deployed_agent()
    for _ in range(3):
        conversation_id = start(alice_client, agent)
        say(alice_client, conversation_id, "please delete my account")
    user_cap, agent_cap = caps
    by_sql, by_orm = by_sql_and_by_orm(
        monkeypatch,
        lambda: open_pause_counts(
            owner_id=alice.pk, user_cap=user_cap, agent_id=uuid.UUID(agent), agent_cap=agent_cap
        ),
    )
    assert by_sql == by_orm == (min(3, user_cap), min(3, agent_cap))


@pytest.mark.parametrize("caps", [(100, 1000), (2, 2), (1, 0), (0, 5), (0, 0)])
def test_the_open_pause_counts_read_with_a_turns_subject_are_the_ones_the_orm_counts(
    settings, alice_client, alice, caps
):
    agent = deployed_agent()
    for _ in range(3):
        conversation_id = start(alice_client, agent)
        say(alice_client, conversation_id, "please delete my account")
    settings.HITL_MAX_OPEN_PAUSES_PER_USER, settings.HITL_MAX_OPEN_PAUSES_PER_AGENT = caps
    user_cap, agent_cap = caps
    by_orm = OpenPauses(
        counted_pending_pauses(cap=user_cap, owner_id=alice.pk).count() if user_cap else 0,
        counted_pending_pauses(cap=agent_cap, agent_id=uuid.UUID(agent)).count() if agent_cap else 0,
    )

    _, with_the_version = newest_deployed_version_and_open_pauses(
        agent_id=agent, environment="production", owner_id=alice.pk
    )
    with_the_conversation = find_on_version(uuid.UUID(conversation_id), with_open_pauses=True)

    assert with_the_version == with_the_conversation.open_pauses == by_orm
    assert by_orm == OpenPauses(min(3, user_cap), min(3, agent_cap))


def test_the_newest_steps_by_sql_are_the_ones_the_orm_reads(monkeypatch, alice_client):
    conversation_id = start(alice_client, deployed_agent())
    for text in ("hello", "hello", "hello"):
        say(alice_client, conversation_id, text)
    for count in (0, 1, 2, 10):
        by_sql, by_orm = by_sql_and_by_orm(
            monkeypatch, lambda count=count: newest_steps(conversation_id, count)
        )
        assert [fields_of(step) for step in by_sql] == [fields_of(step) for step in by_orm]
        assert len(by_sql) == min(count, 4)
        assert all("properties" not in step.__dict__ for step in by_sql)  # deferred, as the ORM's defer()


@pytest.mark.parametrize("change", ["none", "undeployed", "agent deleted", "other environment"])
def test_the_deployed_version_by_sql_is_the_one_the_orm_finds(monkeypatch, alice_client, change):
    conversation_id = paused_conversation(alice_client)
    conversation = Conversation.objects.get(pk=conversation_id)
    if change == "undeployed":
        undeploy_agent(agent_id=conversation.agent_id, version=None, environment="production")
    elif change == "agent deleted":
        delete_agent(agent_id=conversation.agent_id)
    elif change == "other environment":
        Conversation.objects.filter(pk=conversation_id).update(environment="test")

    def reads():
        found = conversation_and_its_version(conversation_id)
        conversation, version = found.conversation, found.version
        exact = deployed_version(
            agent_id=conversation.agent_id,
            version=conversation.agent_version,
            environment=conversation.environment,
        )
        return fields_of(conversation), fields_of(version), fields_of(exact)

    by_sql, by_orm = by_sql_and_by_orm(monkeypatch, reads)
    assert by_sql == by_orm
    assert bool(by_sql[1]) == (change == "none")
    with pytest.raises(Conversation.DoesNotExist):
        conversation_and_its_version("00000000-0000-0000-0000-000000000000")


def test_the_newest_deployed_version_by_sql_is_the_one_the_orm_finds(monkeypatch):
    first = create_agent(document=account_bot(), created_by=None)
    second = update_agent(agent_id=first.agent_id, document=account_bot(name="v2"))
    for row in (first, second):
        deploy_agent(agent_id=row.agent_id, version=row.version, environment="production")
    by_sql, by_orm = by_sql_and_by_orm(
        monkeypatch, lambda: newest_deployed_version(agent_id=first.agent_id, environment="production")
    )
    assert fields_of(by_sql) == fields_of(by_orm) and by_sql.version == second.version
    assert fields_of(by_sql.agent) == fields_of(by_orm.agent)


def test_the_token_its_user_and_their_roles_by_sql_are_what_drf_reads(approver):
    key = Token.objects.get(user=approver).key
    user, token = TokenWithRolesAuthentication().authenticate_credentials(key)
    assert fields_of(user) == fields_of(type(user).objects.get(pk=approver.pk))
    assert fields_of(token) == fields_of(Token.objects.get(pk=key)) and token.user is user
    assert user._hitl_group_names == set(approver.groups.values_list("name", flat=True)) != set()


def test_an_insert_fills_what_save_would_and_reads_back_its_key(alice_client):
    conversation = Conversation.objects.get(pk=start(alice_client, deployed_agent()))
    before = timezone.now()
    step = ConversationStep(
        conversation=conversation, index=7, input="hi", output=["a"], data={"k": [1, "é"]}
    )
    rows.insert(step)
    stored = ConversationStep.objects.get(pk=step.pk)
    assert step.pk is not None and not step._state.adding
    assert (
        fields_of(stored) == fields_of(step)
        and stored.created_at >= before
        and stored.data == {"k": [1, "é"]}
    )


def test_an_update_is_a_compare_and_set_and_a_delete_takes_only_its_rows(alice_client):
    conversation_id = paused_conversation(alice_client)
    pause = Pause.objects.get()
    lost = rows.update(Pause, where={"id": pause.pk, "status": PauseStatus.RESOLVING}, values={"note": "x"})
    won = rows.update(
        Pause,
        where={"id": pause.pk, "status": PauseStatus.PENDING, "resolved_at": None},
        values={"note": "kept", "details": {"a": 1}},
    )
    assert (lost, won) == (0, 1)
    assert Pause.objects.values_list("note", "details").get() == ("kept", {"a": 1})

    ConversationStep.objects.filter(conversation_id=conversation_id).update(undone=True)
    indexes = sorted(
        ConversationStep.objects.filter(conversation_id=conversation_id).values_list("index", flat=True)
    )
    gone = rows.delete(
        ConversationStep,
        where={"conversation_id": conversation_id, "undone": True, "index__gte": indexes[-1]},
    )
    assert gone == 1
    assert sorted(ConversationStep.objects.values_list("index", flat=True)) == indexes[:-1]


@pytest.mark.parametrize("status", [PauseStatus.PENDING, PauseStatus.RESOLVED])
def test_exists_by_sql_is_what_the_orm_answers(monkeypatch, alice_client, status):
    paused_conversation(alice_client)
    pause = Pause.objects.get()
    where = {"subject_id": pause.subject_id, "status": status, "resolved_at": None}

    found = by_sql_and_by_orm(monkeypatch, lambda: rows.exists(Pause, where=where))

    assert found == (status == PauseStatus.PENDING,) * 2


@pytest.mark.django_db(transaction=True)
def test_hand_written_statements_share_one_cursor_per_connection():
    assert rows.fetch_one("SELECT %s", [1]) == (1,)
    kept = rows.kept_cursor()
    assert rows.fetch_all("SELECT %s UNION ALL SELECT %s", [2, 3]) == [(2,), (3,)]
    assert rows.kept_cursor() is kept and not kept.cursor.closed

    connection.close()  # the next statement connects again: a cursor on the old connection is no use
    assert rows.fetch_one("SELECT %s", [4]) == (4,)
    assert rows.kept_cursor() is not kept
    assert rows.kept_cursor().cursor.connection is connection.connection


@pytest.mark.django_db(transaction=True)
def test_a_pooled_connection_keeps_its_cursor_for_whichever_request_gets_it(monkeypatch):
    """psycopg's pool hands its connections out in turn, so a request seldom gets the connection the
    last one of its thread had: the cursor is kept with the connection, not with the thread."""
    options = {**connection.settings_dict["OPTIONS"], "pool": {"min_size": 2, "max_size": 2}}
    handler = ConnectionHandler({DEFAULT_DB_ALIAS: {**connection.settings_dict, "OPTIONS": options}})
    db = handler[DEFAULT_DB_ALIAS]
    monkeypatch.setattr(rows, "current", lambda: db)
    cursors: dict[int, list[Any]] = {}
    try:
        db.ensure_connection()  # Django opens its pool with the first connection,
        db.close()
        db.pool.wait(timeout=10)  # and the pool its second one on a thread of its own
        for request in range(6):
            assert rows.fetch_one("SELECT %s", [request]) == (request,)
            cursors.setdefault(id(db.connection), []).append(rows.kept_cursor().cursor)
            db.close()  # the end of a request: the connection goes back to the pool
    finally:
        db.close_pool()
    assert len(cursors) == 2, cursors  # both of the pool's connections served
    for kept in cursors.values():
        assert len(kept) == 3 and all(cursor is kept[0] for cursor in kept)


def test_the_kept_cursor_keeps_its_dumpers_and_loaders_from_one_statement_to_the_next():
    rows.fetch_one("SELECT %s, now()", [1])
    adapters = rows.kept_cursor().cursor._tx  # psycopg's Transformer: what the cursor has looked up
    rows.fetch_one("SELECT %s::text, %s", ["other", uuid.uuid4()])
    rows.fetch_all("SELECT %s UNION ALL SELECT %s", [2, 3])
    assert rows.kept_cursor().cursor._tx is adapters


def _values_whose_dumper_depends_on_them() -> list[Any]:
    from datetime import UTC, date, datetime
    from decimal import Decimal

    return [
        1,
        2**40,
        2**70,  # int2, int8, numeric: the dumper is picked by the value
        -5,
        None,
        "text",
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
        [1, 2],
        ["a", "b"],
        [2**70],
        [],
        datetime(2026, 12, 6, 8, 30, 0, 123456, tzinfo=UTC),
        date(2026, 12, 6),
        Decimal("1.50"),
        1.5,
        True,
        b"bytes",
    ]


def test_values_of_changing_types_go_through_the_kept_cursor_as_through_a_new_one():
    """Where the cursor keeps what it looked up, a value of another type in the same place of the next
    statement (or of the same one) still gets its own dumper, and each column its own loader: every
    answer is a new cursor's, value and type."""

    def through_a_new_cursor(sql: str, params: list[Any]) -> Any:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()

    values = _values_whose_dumper_depends_on_them()
    for first, second in zip(values, [*values[1:], values[0]], strict=True):
        for sql, params in (
            ("SELECT %s", [first]),
            ("SELECT %s, %s", [second, first]),
            ("SELECT %s", [second]),
        ):
            expected = through_a_new_cursor(sql, params)
            answered = rows.fetch_one(sql, params)
            assert [(type(value), value) for value in answered] == [
                (type(value), value) for value in expected
            ]


def test_the_kept_cursor_logs_its_statements_while_queries_are_captured():
    rows.fetch_one("SELECT %s", [1])
    with CaptureQueriesContext(connection) as captured:
        rows.fetch_one("SELECT %s AS captured", [2])
    rows.fetch_one("SELECT %s AS not_captured", [3])
    assert [query["sql"] for query in captured.captured_queries] == ["SELECT 2 AS captured"]
    assert not isinstance(rows.kept_cursor(), CursorDebugWrapper)


def test_a_statement_that_fails_on_the_kept_cursor_raises_djangos_error_and_the_next_one_runs():
    with pytest.raises(DataError), transaction.atomic():
        rows.fetch_one("SELECT 1 / %s", [0])
    assert rows.fetch_one("SELECT %s", [5]) == (5,)


def test_the_kept_cursor_runs_the_execute_wrappers():
    seen = []

    def wrapper(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    rows.fetch_one("SELECT %s", [1])
    with connection.execute_wrapper(wrapper):
        rows.fetch_one("SELECT %s AS wrapped", [2])
    assert seen == ["SELECT %s AS wrapped"]


def test_an_instance_built_from_a_row_is_the_one_from_db_builds(alice_client):
    conversation_id = paused_conversation(alice_client)
    for model, pk, without in [
        (Conversation, conversation_id, ()),
        (Conversation, conversation_id, ("properties",)),
        (Pause, Pause.objects.get().pk, ()),
        (Token, Token.objects.first().pk, ()),
    ]:
        names = [field.attname for field in rows._fields(model, without)]
        values = list(model.objects.filter(pk=pk).values_list(*names).get())
        raw = [json.dumps(value) if isinstance(value, dict | list) else value for value in values]
        built = rows.instance(model, raw, without)
        loaded = model.from_db("default", names, values)
        assert type(built) is model
        assert fields_of(built) == fields_of(loaded)
        assert (
            built.get_deferred_fields()
            == loaded.get_deferred_fields()
            == {model._meta.get_field(name).attname for name in without}
        )
        assert (built._state.adding, built._state.db) == (False, "default")


def test_a_model_with_an_init_receiver_is_built_through_its_init(alice_client):
    conversation_id = start(alice_client, deployed_agent())
    names = [field.attname for field in rows._fields(Conversation, ())]
    values = Conversation.objects.filter(pk=conversation_id).values_list(*names).get()
    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance)

    post_init.connect(receiver, sender=Conversation)
    try:
        built = rows.instance(Conversation, [json.dumps(v) if isinstance(v, dict) else v for v in values])
    finally:
        post_init.disconnect(receiver, sender=Conversation)
    assert seen == [built] and str(built.pk) == str(conversation_id)


def _values_of_every_kind() -> list[Any]:
    from datetime import UTC, date, datetime
    from decimal import Decimal

    from approvals.models import PauseKind

    return [
        None,
        "",
        "text",
        PauseKind.RULE,  # a str subclass: prepared by its field
        0,
        7,
        True,
        False,
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "12345678-1234-5678-1234-567812345678",
        datetime(2026, 12, 6, 12, 0, tzinfo=UTC),
        timezone.now(),
        date(2026, 12, 6),
        Decimal("1.5"),
        1.5,
        {"a": [1, 2]},
        [1, "two"],
    ]


def test_a_value_is_prepared_for_the_database_as_its_field_prepares_it():
    """``rows.prepared`` skips ``get_db_prep_save`` only where that hands the value on unchanged: for every
    concrete field of the models the hand-written statements write, and values of every kind, it answers
    what the field answers (same value, same type), or raises what the field raises."""
    import warnings

    from django_q.models import Schedule

    from approvals.models import AuditEntry, AuditHead

    checked = 0
    for model in (Pause, Conversation, ConversationStep, AuditEntry, AuditHead, Schedule):
        for field in model._meta.concrete_fields:
            for value in _values_of_every_kind():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        expected: Any = field.get_db_prep_save(value, connection)
                    except Exception as exc:  # the field refuses it: so must the fast path
                        expected = type(exc)
                    try:
                        answered: Any = rows.prepared(field, value, connection)
                    except Exception as exc:
                        answered = type(exc)
                if isinstance(expected, type):
                    assert answered is expected, (model, field.name, value)
                    continue
                if hasattr(expected, "obj"):  # psycopg's Jsonb wrapper: compare what it wraps
                    assert type(answered) is type(expected) and answered.obj == expected.obj
                else:
                    assert (type(answered), answered) == (type(expected), expected), (
                        model,
                        field.name,
                        value,
                    )
                checked += 1
    assert checked > 500


def test_a_naive_datetime_is_prepared_by_its_field_which_makes_it_aware():
    from datetime import datetime

    field = Pause._meta.get_field("paused_at")
    with pytest.warns(RuntimeWarning, match="naive datetime"):
        stored = rows.prepared(field, datetime(2026, 12, 6, 12, 0), connection)
    assert stored.utcoffset() is not None


def _stored_as_jsonb(wrapped: Any) -> str | type:
    """The text PostgreSQL keeps for a Jsonb parameter, or the class of what writing it raised."""
    try:
        with transaction.atomic():
            return rows.fetch_one("SELECT %s::jsonb::text", [wrapped])[0]
    except Exception as exc:
        return type(exc)


def _json_values_at_the_edges() -> list[Any]:
    from datetime import UTC, datetime

    from approvals.models import PauseKind

    deep: Any = "bottom"
    for _ in range(300):  # deeper than orjson writes
        deep = [deep]
    return [
        {},
        [],
        {"a": None},
        {"text": 'é ✓ 😀 \u2028 \x01 "quoted" \\'},
        {"floats": [0.1, 1e16, 1e-7, -0.0, 1.5e308, 5e-324]},
        {"ints": [0, -1, 2**63 - 1, -(2**63), 2**64, 2**70, -(2**70)]},
        {"nan": float("nan")},
        [float("inf")],
        {1: "an int key", 2.5: "a float key"},
        {True: "a bool key", None: "a None key"},
        {PauseKind.RULE: PauseKind.RULE},
        {"tuple": (1, 2)},
        {"surrogate": "\ud800"},
        {"zero": "\x00"},
        {"when": datetime(2026, 12, 6, tzinfo=UTC)},
        [deep],
    ]


def test_a_json_value_is_stored_as_the_standard_library_writes_it():
    """What ``json_columns`` writes for a plain JSON field, PostgreSQL stores exactly as what Django writes
    with ``json.dumps``; a value PostgreSQL or the encoder refuses is refused alike (NaN, a lone surrogate,
    a datetime)."""
    field = Conversation._meta.get_field("properties")
    for value in _json_values_at_the_edges():
        ours, djangos = rows.prepared(field, value, connection), field.get_db_prep_save(value, connection)
        assert ours.dumps is not djangos.dumps  # the fast path was taken
        assert _stored_as_jsonb(ours) == _stored_as_jsonb(djangos), (
            value if not isinstance(value, list) else "deep"
        )


def test_a_json_column_is_read_as_the_standard_library_reads_it():
    """``json_columns.loaded`` answers what ``json.loads`` answers for PostgreSQL's text of a jsonb value:
    the same values of the same types (an integer beyond 64 bits stays an integer, ``1e400`` an inf)."""
    from common import json_columns

    texts = [
        "{}",
        '{"a": [1, 2.50, -0, 1E2, 0.000001, "é", null, true]}',
        "[9223372036854775807, -9223372036854775808, 18446744073709551616, 1180591620717411303424]",
        "[123456789012345678.5, 0.12345678901234567891]",
        "[1e400, -1e400, 1e-400]",
        '{"deep": [[[[{"x": "\\u00e9\\n"}]]]]}',
    ]
    for text in texts:
        stored = rows.fetch_one("SELECT %s::jsonb::text", [text])[0]
        assert repr(json_columns.loaded(stored)) == repr(json.loads(stored)), stored
        assert repr(json_columns.from_db(stored, None, connection)) == repr(json.loads(stored))
    assert json_columns.from_db("not json", None, connection) == "not json"  # as Django's from_db_value
    assert json_columns.from_db(None, None, connection) is None
