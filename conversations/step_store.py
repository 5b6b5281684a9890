"""Loading a conversation's memory from its step rows, and writing a turn's step back.

A turn loads a bounded window, so its cost does not grow with the conversation: the newest
``HITL_MEMORY_WINDOW_STEPS`` live steps (default 10, an llm task's default conversationHistoryLimit),
in one query, without the per-step ``properties`` snapshot (only undo reads it). What reaches further
back reads the database on demand (conversations.pipeline.conversation_memory): an llm task with a longer history,
the ``anyStep``/``never`` conditions, and the recall tool, which searches in SQL.

Live steps are the indexes 0..n-1 of a conversation and undone steps the tail after them: undo marks
the newest live step, redo the oldest undone one, and a new step first deletes the undone tail.
``Conversation.step_count`` is n, kept in the same transactions. So the newest steps are the index
range ``[n - count, n)``, read through the (conversation, index) unique index with n taken from the
conversation's row by primary key in the same statement: bounded whatever the planner guesses a
conversation's length to be (``ORDER BY index DESC LIMIT count`` alone may make it fetch and sort all).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import IntegerField, QuerySet, TextField, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Lower, StrIndex
from rest_framework.authtoken.models import Token

from common import rows
from conversations.models import Conversation, ConversationStep
from conversations.pipeline.conversation_memory import Caller, ConversationMemory, Step

# " ".join([input, *output]) of a step row, as the recall tool matches it in memory.
_SEARCHED_TEXT = (
    "input || coalesce((SELECT string_agg(' ' || part.value, '' ORDER BY part.position)"
    " FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(output) = 'array' THEN output ELSE '[]' END)"
    " WITH ORDINALITY AS part(value, position)), '')"
)


def step_from_row(row: ConversationStep) -> Step:
    return Step(
        input=row.input,
        context=row.context,
        actions=list(row.actions),
        output=list(row.output),
        outputs=dict(row.outputs),
        data=dict(row.data),
        quick_replies=list(row.quick_replies),
    )


def caller_for(user: Any) -> Caller | None:
    if user is None:
        return None

    def load_token() -> str:
        return Token.objects.filter(user_id=user.pk).values_list("key", flat=True).first() or ""

    return Caller(username=user.get_username(), load_token=load_token)


def _live(conversation_id: Any) -> QuerySet[ConversationStep]:
    return ConversationStep.objects.filter(conversation_id=conversation_id, undone=False)


def _step_count_minus(conversation_id: Any, count: int) -> RawSQL:
    """The conversation's ``step_count`` minus ``count``, read by primary key in the statement that uses it."""
    table = connection.ops.quote_name(Conversation._meta.db_table)
    return RawSQL(  # nosec B611  # constant SQL, values are parameters
        f'(SELECT "step_count" - %s FROM {table} WHERE "id" = %s)',  # nosec B608  # identifiers from model metadata, values are parameters
        [count, conversation_id],
        output_field=IntegerField(),
    )


def newest_live(conversation_id: Any, count: int) -> QuerySet[ConversationStep]:
    """The newest ``count`` live steps, newest first: the index range [step_count - count, step_count)."""
    return (
        _live(conversation_id)
        .filter(
            index__gte=_step_count_minus(conversation_id, max(0, count)),
            index__lt=_step_count_minus(conversation_id, 0),
        )
        .order_by("-index")
    )


def newest_steps(conversation_id: Any, count: int) -> list[ConversationStep]:
    """The newest ``count`` live steps, oldest first, without their ``properties``; one query."""
    if not rows.on_postgresql():
        return list(newest_live(conversation_id, count).defer("properties"))[::-1]
    found = rows.fetch_all(_newest_steps_sql(), [conversation_id, max(0, count)])
    return rows.instances(ConversationStep, found, WITHOUT_PROPERTIES)


WITHOUT_PROPERTIES = ("properties",)


@functools.cache
def _newest_steps_sql() -> str:
    """``newest_live`` written out: the index range [step_count - count, step_count), oldest first."""
    return (
        f"SELECT {rows.select_list(ConversationStep, 's', WITHOUT_PROPERTIES)} FROM {rows.table(ConversationStep)} s "  # nosec B608  # identifiers from model metadata, values are parameters
        f'JOIN {rows.table(Conversation)} c ON c."id" = s."conversation_id" '
        f'WHERE s."conversation_id" = %s AND NOT s."undone" AND s."index" >= c."step_count" - %s '
        f'AND s."index" < c."step_count" ORDER BY s."index"'
    )


def memory_window() -> int:
    return max(1, int(settings.HITL_MEMORY_WINDOW_STEPS))


def _load_steps(conversation_id: Any) -> Any:
    def load(start: int, stop: int) -> list[Step]:
        rows = _live(conversation_id).filter(index__gte=start, index__lt=stop).order_by("index")
        return [step_from_row(row) for row in rows.defer("properties")]

    return load


def _search_steps(conversation_id: Any, before_index: int | None) -> Any:
    """The recall tool's search over the live steps before ``before_index`` (None: all), in SQL."""

    def search(needle: str, limit: int) -> list[dict[str, Any]]:
        rows = _live(conversation_id)
        if before_index is not None:
            rows = rows.filter(index__lt=before_index)
        if connection.vendor != "postgresql":  # the try-it-out SQLite fallback: match in Python
            found = [
                (i, text, out)
                for i, text, out in rows.order_by("index").values_list("index", "input", "output")
                if needle in " ".join([text, *out]).lower()
            ][-limit:]
        else:
            haystack = Lower(RawSQL(_SEARCHED_TEXT, [], output_field=TextField()))  # nosec B611  # constant SQL, values are parameters
            found = list(
                rows.annotate(at=StrIndex(haystack, Lower(Value(needle))))
                .filter(at__gt=0)
                .order_by("-index")
                .values_list("index", "input", "output")[:limit]
            )[::-1]
        return [{"turn": index, "input": text, "output": list(output)} for index, text, output in found]

    return search


def _memory(
    conversation: Conversation,
    *,
    current: Step,
    previous: list[ConversationStep],
    before_index: int | None,
    caller: Caller | None,
) -> ConversationMemory:
    return ConversationMemory(
        conversation_id=str(conversation.id),
        current=current,
        previous=[step_from_row(row) for row in previous],
        properties=dict(conversation.properties),
        caller=caller,
        first_index=previous[0].index if previous else 0,
        load_steps=_load_steps(conversation.pk),
        search_steps=_search_steps(conversation.pk, before_index),
    )


def memory_for_new_turn(
    conversation: Conversation,
    *,
    user_input: str,
    context: dict[str, Any],
    caller: Caller | None,
    first_turn: bool = False,
    window: list[ConversationStep] | None = None,
) -> ConversationMemory:
    """The memory of a new turn: the newest live steps (none to read for a conversation's ``first_turn``;
    ``window``: as ``hold_for_turn`` just read them)."""
    if window is not None:
        previous = window
    else:
        previous = [] if first_turn else newest_steps(conversation.pk, memory_window())
    return _memory(
        conversation,
        current=Step(input=user_input, context=context),
        previous=previous,
        before_index=None,
        caller=caller,
    )


def memory_for_paused_turn(
    conversation: Conversation, *, caller: Caller | None, window: list[ConversationStep] | None = None
) -> tuple[ConversationMemory, ConversationStep]:
    """The paused turn's memory and its step's row. ``window``: its newest ``memory_window() + 1`` live
    steps as the caller read them in this transaction (``conversations.resume_rows``); else read here."""
    rows = window if window is not None else newest_steps(conversation.pk, memory_window() + 1)
    if not rows:
        raise LookupError("the paused conversation has no step to continue")
    memory = _memory(
        conversation,
        current=step_from_row(rows[-1]),
        previous=rows[:-1],
        before_index=rows[-1].index,
        caller=caller,
    )
    return memory, rows[-1]


_CLAIM_TURN_SQL = (
    'UPDATE {table} SET "state" = %s, "turn_started_at" = %s, "turn_alive_until" = %s, '
    '"cancel_requested_at" = NULL, "cancel_requested_by" = \'\' WHERE "id" = %s AND "state" IN ({talkable}) '
    'RETURNING "properties", "step_count"'
)


def claim_turn(
    conversation: Conversation, *, running: str, talkable: tuple[str, ...], started: Any, alive_until: Any
) -> bool:
    """A new turn's compare-and-set: the conversation moves from one of the ``talkable`` states to
    ``running`` (clearing a cancel of an earlier turn). On success the conversation object takes the
    properties and step count the turn starts from, as they are now (not as they were when it was read
    for the access check: a turn that committed in between counts). False: not talkable, nothing written."""
    table = connection.ops.quote_name(Conversation._meta.db_table)
    row = rows.fetch_one(
        _CLAIM_TURN_SQL.format(table=table, talkable=", ".join(["%s"] * len(talkable))),
        [running, started, alive_until, conversation.pk, *talkable],
    )
    if row is None:
        return False
    properties = rows.column_value(Conversation, "properties", row[0])
    conversation.properties, conversation.step_count, conversation.state = properties, row[1], running
    conversation.turn_started_at, conversation.turn_alive_until = started, alive_until
    conversation.cancel_requested_at, conversation.cancel_requested_by = None, ""
    return True


@dataclass(frozen=True)
class HeldTurn:
    """A conversation held for a turn that runs in one transaction (``hold_for_turn``).

    ``row_state``: the state its row is in until the turn's commit (the talkable state it was found in:
    holding it wrote nothing). ``window``: the newest live steps, oldest first, without their
    ``properties``. ``undone_tail``: whether an undone tail may follow them, which the turn's new step
    must drop (False only when the read showed there is none)."""

    row_state: str
    window: list[ConversationStep]
    undone_tail: bool


def hold_for_turn(
    conversation: Conversation, *, running: str, talkable: tuple[str, ...], started: Any, alive_until: Any
) -> HeldTurn | None:
    """A new turn's claim inside the turn's own transaction (conversations.local_turns): the conversation's
    row locked until the commit, and what the turn starts from, in one statement: its properties, its step
    count, its window of steps and whether an undone tail follows them. Nothing is written until the
    turn's commit (``commit_turn_state`` with this ``HeldTurn``), which also does what ``claim_turn``
    writes. None: not talkable (or gone), nothing held for long (the caller's transaction ends).

    A read that waited for another transaction holding the row (a turn, an undo, a redo) sees the row as
    that one committed it, but the steps as they were before it: then the window does not end at the
    step count, and it is read again in a statement of its own, the undone tail dropped unconditionally.
    """
    if not rows.on_postgresql():
        if not claim_turn(
            conversation, running=running, talkable=talkable, started=started, alive_until=alive_until
        ):
            return None
        return HeldTurn(running, newest_steps(conversation.pk, memory_window()), undone_tail=True)
    found = rows.fetch_all(_hold_sql(), [memory_window(), conversation.pk])
    if not found:  # gone, or a wait for another transaction left no row to show: read again to know
        found = rows.fetch_all(_hold_sql(), [memory_window(), conversation.pk])
    if not found or found[0][0] not in talkable:
        return None
    state, properties, step_count, undone_tail = found[0][:4]
    window = rows.instances(
        ConversationStep, [row[4:] for row in found if row[4] is not None], WITHOUT_PROPERTIES
    )
    if (window[-1].index + 1 if window else 0) != step_count:
        window, undone_tail = newest_steps(conversation.pk, memory_window()), True
    conversation.properties = rows.column_value(Conversation, "properties", properties)
    conversation.step_count, conversation.state = step_count, running
    conversation.turn_started_at, conversation.turn_alive_until = started, alive_until
    conversation.cancel_requested_at, conversation.cancel_requested_by = None, ""
    return HeldTurn(state, window, undone_tail)


@functools.cache
def _hold_sql() -> str:
    """The conversation's row, locked, with whether a step at or after its step_count exists (an undone
    one: live steps are 0..step_count-1; the newest index, read once through the (conversation, index)
    index) and its window of live steps (the index range [step_count - count, step_count), oldest first;
    none: one row of NULLs), read through that index too: a lateral subquery kept apart from the join
    (``OFFSET 0``: never flattened into a join the planner may hash), so the range is an index condition
    on the row's own step_count whatever the planner guesses a conversation's length to be."""
    steps = rows.table(ConversationStep)
    window = window_join('c."id"', 'c."step_count"')
    return (
        f'SELECT c."state", c."properties", c."step_count", coalesce(n."newest" >= c."step_count", false), '  # nosec B608  # identifiers from model metadata, values are parameters
        f"{rows.select_list(ConversationStep, 's', WITHOUT_PROPERTIES)} FROM {rows.table(Conversation)} c "
        f'CROSS JOIN LATERAL (SELECT max(t."index") AS "newest" FROM {steps} t WHERE t."conversation_id" = c."id") n '
        f'{window} WHERE c."id" = %s ORDER BY s."index" FOR UPDATE OF c'
    )


def window_join(conversation_id: str, step_count: str) -> str:
    """A window of live steps joined as ``s`` (its select list: ``rows.select_list(ConversationStep, 's',
    WITHOUT_PROPERTIES)``; none: one row of NULLs), for the conversation and step count that the SQL
    expressions ``conversation_id`` and ``step_count`` name: the index range [step_count - count,
    step_count), ``count`` its one parameter. A lateral subquery kept apart from the join (``OFFSET 0``:
    never flattened into a join the planner may hash), so the range is an index condition in every plan."""
    return (
        f"LEFT JOIN LATERAL (SELECT {rows.select_list(ConversationStep, 'w', WITHOUT_PROPERTIES)} "  # nosec B608  # identifiers from model metadata, values are parameters
        f'FROM {rows.table(ConversationStep)} w WHERE w."conversation_id" = {conversation_id} AND NOT w."undone" '
        f'AND w."index" >= {step_count} - %s AND w."index" < {step_count} OFFSET 0) s ON true'
    )


_COMMIT_TURN_SQL = (
    'UPDATE {table} SET "state" = %s, "properties" = %s, "step_count" = "step_count" + %s '
    'WHERE "id" = %s AND "state" = %s AND "cancel_requested_at" IS NULL RETURNING "step_count"'
)


_COMMIT_HELD_TURN_SQL = (
    'UPDATE {table} SET "state" = %s, "properties" = %s, "step_count" = "step_count" + %s, '
    '"turn_started_at" = %s, "turn_alive_until" = %s, "cancel_requested_at" = NULL, "cancel_requested_by" = \'\' '
    'WHERE "id" = %s AND "state" = %s RETURNING "step_count"'
)


def commit_turn_state(
    conversation: Conversation,
    *,
    running: str,
    state: str,
    properties: dict[str, Any],
    appends_step: bool,
    held: HeldTurn | None = None,
) -> int | None:
    """The turn's compare-and-set, in the caller's transaction: the conversation takes ``state`` and
    ``properties`` if it is still ``running`` with no cancel recorded, and counts the step the turn is
    about to append (``appends_step``), in one statement. Returns the new ``step_count``, None when the
    turn lost the conversation (nothing written).

    ``held``: the turn holds the row (``hold_for_turn``), which is still in the state it was found in;
    this statement also writes what ``claim_turn`` would have (the turn's start and lease, no cancel)."""
    sql, params = _commit_statement(conversation, running, state, properties, appends_step, held)
    row = rows.fetch_one(sql, params)
    if row is None:
        return None
    conversation.step_count = row[0]
    return row[0]


def _commit_statement(
    conversation: Conversation,
    running: str,
    state: str,
    properties: dict[str, Any],
    appends_step: bool,
    held: HeldTurn | None,
) -> tuple[str, list[Any]]:
    table = connection.ops.quote_name(Conversation._meta.db_table)
    stored = rows.prepared(Conversation._meta.get_field("properties"), properties, rows.current())
    counted = 1 if appends_step else 0
    if held is None or held.row_state == running:  # claimed with a write (claim_turn)
        return _COMMIT_TURN_SQL.format(table=table), [state, stored, counted, conversation.pk, running]
    started, alive_until = conversation.turn_started_at, conversation.turn_alive_until
    params = [state, stored, counted, started, alive_until, conversation.pk, held.row_state]
    return _COMMIT_HELD_TURN_SQL.format(table=table), params


def commit_turn_and_step(
    conversation: Conversation,
    step: Step,
    *,
    running: str,
    state: str,
    properties: dict[str, Any],
    row: ConversationStep | None = None,
    held: HeldTurn | None = None,
    then: tuple[str, list[Any]] | None = None,
    then_returns: tuple[str, ...] = (),
) -> tuple[ConversationStep, int, tuple[Any, ...] | None] | None:
    """``commit_turn_state`` and ``save_step`` as one statement: the step is written only when the
    compare-and-set won. ``row``: the continued step's row, updated; else a new step is appended at the
    new ``step_count - 1`` (only for a turn that leaves no undone tail to drop). ``then``: an UPDATE of
    the caller's (``rows.update_statement``) that also runs only when it won, in the same statement;
    ``then_returns``: SQL expressions over the row it updates, returned with it.

    The step's row, how many rows ``then`` changed and what ``then_returns`` answered (None each when it
    changed none; None on the ORM path, which does not ask); None when the turn lost the conversation
    (nothing written)."""
    if not rows.on_postgresql():
        won = commit_turn_state(
            conversation,
            running=running,
            state=state,
            properties=properties,
            appends_step=row is None,
            held=held,
        )
        if won is None:
            return None
        written = save_step(conversation, step, properties, row=row, counted=True, drop_undone=False)
        return written, (_run(*then) if then is not None else 0), None  # ``then_returns`` not answered
    sql, params = _commit_statement(conversation, running, state, properties, row is None, held)
    then_sql, then_params = then if then is not None else ("", [])
    fields = _step_fields(step, properties)
    if row is not None:
        update, update_params = rows.update_statement(ConversationStep, where={"id": row.pk}, values=fields)
        found = rows.fetch_one(
            _commit_and_update_sql(sql, then_sql, update, then_returns),
            [*params, *then_params, *update_params],
        )
        if found is None:
            return None
        for name, value in fields.items():
            setattr(row, name, value)
        conversation.step_count = found[0]
        return row, found[1], tuple(found[2:])
    created = ConversationStep(conversation=conversation, index=0, **fields)
    appended = _appended_fields()
    values = rows.insert_values(created, appended)
    stored = [value for field, value in zip(appended, values, strict=True) if field.name != "index"]
    found = rows.fetch_one(
        _commit_and_append_sql(sql, then_sql, then_returns), [*params, *then_params, *stored]
    )
    if found is None:
        return None
    created.pk, created.index = found[0], found[1]
    created._state.adding, created._state.db = False, connection.alias
    conversation.step_count = created.index + 1
    return created, found[2], tuple(found[3:])


def _run(sql: str, params: list[Any]) -> int:
    cursor = rows.kept_cursor()
    cursor.execute(sql, params)
    return cursor.rowcount


def insert_with_first_step(
    conversation: Conversation, step: Step, properties: dict[str, Any]
) -> ConversationStep:
    """A new conversation's row, as its first turn left it (``step_count`` 1), and that turn's step, as one
    statement (``rows.insert_together``)."""
    conversation.step_count = 1
    created = ConversationStep(conversation=conversation, index=0, **_step_fields(step, properties))
    rows.insert_together(conversation, created)
    return created


def _appended_fields() -> list[Any]:
    meta = ConversationStep._meta
    return [field for field in meta.concrete_fields if field is not meta.pk]


def _with(commit: str, then: str, returns: tuple[str, ...] = ()) -> tuple[str, str]:
    """The WITH of a compare-and-set (``c``) and of the caller's UPDATE that runs only when it won (``t``),
    and what counts the rows that one changed, followed by each of ``returns`` over its row."""
    if not then:
        return f"WITH c AS ({commit}) ", "0"
    returned = "".join(f", {expression} AS r{number}" for number, expression in enumerate(returns))
    answers = "".join(f", (SELECT r{number} FROM t)" for number in range(len(returns)))  # nosec B608  # column names of this statement
    return (
        f"WITH c AS ({commit}), t AS ({then} AND EXISTS (SELECT 1 FROM c) RETURNING 1{returned}) ",  # nosec B608  # statements built from model metadata
        f"(SELECT count(*) FROM t){answers}",  # nosec B608  # column names of this statement
    )


@functools.cache
def _commit_and_append_sql(commit: str, then: str, returns: tuple[str, ...] = ()) -> str:
    """``WITH c AS (the compare-and-set) INSERT INTO step SELECT ... FROM c``: no row when it lost."""
    quote = connection.ops.quote_name
    fields = _appended_fields()
    columns = ", ".join(quote(field.column) for field in fields)
    values = ", ".join('c."step_count" - 1' if field.name == "index" else "%s" for field in fields)
    prefix, counted = _with(commit, then, returns)
    return (
        f"{prefix}INSERT INTO {rows.table(ConversationStep)} ({columns}) "  # nosec B608  # identifiers from model metadata, values are parameters
        f'SELECT {values} FROM c RETURNING {quote(ConversationStep._meta.pk.column)}, "index", {counted}'
    )


@functools.cache
def _commit_and_update_sql(commit: str, then: str, update: str, returns: tuple[str, ...] = ()) -> str:
    """``WITH c AS (the compare-and-set) UPDATE step ... WHERE ... AND EXISTS c``: no row when it lost."""
    prefix, counted = _with(commit, then, returns)
    return f'{prefix}{update} AND EXISTS (SELECT 1 FROM c) RETURNING (SELECT "step_count" FROM c), {counted}'  # nosec B608  # statements built from model metadata


def _step_fields(step: Step, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "input": step.input,
        "context": step.context,
        "actions": step.actions,
        "output": step.output,
        "outputs": step.outputs,
        "data": step.data,
        "quick_replies": step.quick_replies,
        "properties": properties,
    }


def save_step(
    conversation: Conversation,
    step: Step,
    properties: dict[str, Any],
    row: ConversationStep | None = None,
    *,
    counted: bool = False,
    drop_undone: bool = True,
) -> ConversationStep:
    """Update the continued step's row, or append a new step (dropping redo history).

    ``counted``: the caller's compare-and-set already counted the new step (``commit_turn_state``), which
    goes at ``conversation.step_count - 1``. ``drop_undone=False`` when there can be no undone tail (a
    conversation's first turn).
    """
    fields = _step_fields(step, properties)
    if row is not None:
        for name, value in fields.items():
            setattr(row, name, value)
        rows.update(ConversationStep, where={"id": row.pk}, values=fields)
        return row
    with transaction.atomic(savepoint=False):  # the count, the redo history and the new step, or none
        if counted:
            index = conversation.step_count - 1
        else:
            table = connection.ops.quote_name(Conversation._meta.db_table)
            counted_row = rows.fetch_one(
                f'UPDATE {table} SET "step_count" = "step_count" + 1 WHERE "id" = %s RETURNING "step_count"',  # nosec B608  # identifiers from model metadata, values are parameters
                [conversation.pk],
            )
            index = counted_row[0] - 1
        if drop_undone:
            # the undone tail, dropped: a live step there would be a broken invariant, and the insert fails
            rows.delete(
                ConversationStep,
                where={"conversation_id": conversation.pk, "undone": True, "index__gte": index},
            )
        created = ConversationStep(conversation=conversation, index=index, **fields)
        rows.insert(created)
    conversation.step_count = index + 1
    return created
