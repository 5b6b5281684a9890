"""Parsing a decision body. Runs before anything is touched, so bad input never consumes a pause."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from approvals.models import Verdict
from common.body_rules import body_errors, shown_text
from common.field_errors import utf16_length
from common.request_bodies import BodySerializer, TextField, validated_body

NOTE_MAX = 4096
VERDICT_REQUIRED = "Request body must include a 'verdict' field (APPROVED or REJECTED)"
# Accepted for compatibility with clients of the original, and ignored: the actor is the caller.
IGNORED_FIELDS = {"decidedBy"}


@dataclass(frozen=True)
class DecisionInput:
    verdict: str
    note: str = ""
    tool_decisions: dict[str, Any] = field(default_factory=dict)
    # A group TASK pause's per-task verdicts ({taskId: "APPROVED"|"REJECTED"}, as sent): checked against
    # the pause by the TASK kind's validator (groups), applied by its continuation.
    task_approvals: dict[str, Any] = field(default_factory=dict)
    # A rejection whose note is the reviewer's instruction to the model (the admin's "Reply with
    # guidance", built by ``guidance_decision``): the continuation frames the note as guidance.
    guidance: bool = False
    # An approval request's edit ({"amendedArguments": {...}} and/or {"amendedRequest": {...}}, parsed by
    # its own body serializer): checked against the pause by the ACTION kind's validator.
    amendments: dict[str, Any] = field(default_factory=dict)

    def recorded_details(self) -> dict[str, Any]:
        """What the decision adds to the pause beyond verdict and note (``Pause.decision_details``)."""
        details: dict[str, Any] = {"guidance": True} if self.guidance else {}
        if self.tool_decisions:
            details["toolDecisions"] = self.tool_decisions
        if self.task_approvals:
            details["taskApprovals"] = self.task_approvals
        details.update(self.amendments)
        return details


def parse_verdict(value: Any) -> str | None:
    """Trimmed and upper-cased; anything but APPROVED or REJECTED is no verdict."""
    if not isinstance(value, str):
        return None
    candidate = value.strip().upper()
    return candidate if candidate in (Verdict.APPROVED, Verdict.REJECTED) else None


def bad_verdict_message(value: Any) -> str:
    """What is wrong with a verdict that is there but is not APPROVED or REJECTED, naming the value."""
    if isinstance(value, str):
        return f"verdict '{shown_text(value, limit=40)}' must be APPROVED or REJECTED"
    kind = {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object"}.get(
        type(value), "not a string"
    )
    return f"verdict must be the string APPROVED or REJECTED, not {kind}"


def decision_problem_detail(raw_verdict: Any, errors: list[dict[str, str]]) -> str:
    """The 400's ``detail`` for a bad decision: what is wrong with the verdict first, as the original words it."""
    if raw_verdict is None:
        return VERDICT_REQUIRED
    if parse_verdict(raw_verdict) is None:
        return bad_verdict_message(raw_verdict)
    if any(e["field"] == "note" and "exceeds" in e["message"] for e in errors):
        return f"Decision note exceeds the maximum length of {NOTE_MAX} characters"
    return "; ".join(f"{e['field']}: {e['message']}" for e in errors)


def _refused(errors: list[dict[str, str]]) -> serializers.ValidationError:
    """``body_errors`` of a value (fields relative to it) as the value's own validation error."""
    if any(e["field"] for e in errors):
        return serializers.ValidationError({e["field"]: [e["message"]] for e in errors})
    return serializers.ValidationError([e["message"] for e in errors])


@extend_schema_field(
    {
        "type": "string",
        "enum": [Verdict.APPROVED, Verdict.REJECTED],
        "description": "Case-insensitive; surrounding blanks are ignored",
    }
)
class VerdictField(serializers.Field):
    default_error_messages = {
        "required": "required: APPROVED or REJECTED",
        "null": "required: APPROVED or REJECTED",
    }

    def to_internal_value(self, data: Any) -> str:
        verdict = parse_verdict(data)
        if verdict is None:
            raise serializers.ValidationError(bad_verdict_message(data))
        return verdict


class FlagField(serializers.BooleanField):
    """true or false and nothing else (DRF's BooleanField would take "yes" or 1)."""

    default_error_messages = {"invalid": "must be true or false"}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


GUIDANCE_REQUIRED = "Write the guidance the model should follow: a reply without it decides nothing."


def guidance_errors(*, verdict: str, note: str, tool_decisions: Any) -> list[dict[str, str]]:
    """What is wrong with a reply with guidance (``guidance: true``), as ``[{"field", "message"}]``.

    Rule: **guidance is never empty, and it answers the whole request.** It is a rejection (verdict
    REJECTED) whose note is not blank, with no per-call verdicts: every call, or the rule's remaining
    steps, is declined with the one instruction."""
    errors = []
    if verdict != Verdict.REJECTED:
        errors.append({"field": "guidance", "message": "only a rejection (verdict REJECTED) gives guidance"})
    if not note.strip():
        errors.append({"field": "note", "message": GUIDANCE_REQUIRED})
    if tool_decisions:
        errors.append(
            {"field": "toolDecisions", "message": "guidance answers the whole request: no per-call decisions"}
        )
    return errors


@extend_schema_serializer(component_name="Decision")
class DecisionBodySerializer(BodySerializer):
    """The decision body of every surface: what REST documents is what every surface checks."""

    ignored_fields = frozenset(IGNORED_FIELDS)
    not_an_object = ("verdict", "required")

    verdict = VerdictField()
    note = TextField(
        required=False,
        allow_null=True,
        allow_blank=True,
        trim_whitespace=False,
        default="",
        help_text=f"At most {NOTE_MAX} characters (UTF-16 code units)",
    )
    toolDecisions = serializers.DictField(  # the wire name
        required=False,
        allow_null=True,
        default=dict,
        error_messages={"not_a_dict": "must be an object keyed by call id"},
        help_text='Per call id: {"verdict", "note" (at most 1024), "amendedArguments" (a JSON object, or its '
        "JSON text)}",
    )

    guidance = FlagField(
        required=False,
        default=False,
        help_text="true: a reply with guidance, a rejection whose note the model (or the conversation) reads "
        'as the reviewer\'s instruction ("The reviewer declined and gave guidance: …"); needs verdict '
        "REJECTED, a non-blank note and no toolDecisions",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("guidance") and (
            errors := guidance_errors(
                verdict=attrs["verdict"],
                note=attrs.get("note") or "",
                tool_decisions=attrs.get("toolDecisions"),
            )
        ):
            raise serializers.ValidationError({e["field"]: [e["message"]] for e in errors})
        return attrs

    def validate_note(self, note: str | None) -> str:
        if note is None:
            return ""
        if utf16_length(note) > NOTE_MAX:
            raise serializers.ValidationError(f"exceeds the maximum length of {NOTE_MAX} characters")
        if errors := body_errors(note):
            raise _refused(errors)
        return note

    def validate_toolDecisions(self, tool_decisions: dict[str, Any] | None) -> dict[str, Any]:
        if tool_decisions is None:
            return {}
        if errors := body_errors(tool_decisions):
            raise _refused(errors)
        return tool_decisions

    def problem_detail(self, errors: list[dict[str, str]]) -> str:
        data = self.initial_data
        return decision_problem_detail(data.get("verdict") if isinstance(data, dict) else None, errors)


def guidance_decision(note: Any) -> DecisionInput:
    """The admin's reply with guidance: the REST body ``{"verdict": "REJECTED", "note", "guidance": true}``,
    parsed by REST's parser (a blank note is a 400 on ``note`` before anything is touched)."""
    return parse_decision_body({"verdict": Verdict.REJECTED, "note": note, "guidance": True})


def parse_decision_body(data: Any) -> DecisionInput:
    """The decision in ``data``, or a 400 naming each bad field (nothing is touched before this)."""
    body = validated_body(DecisionBodySerializer, data)
    return DecisionInput(
        verdict=body["verdict"],
        note=body["note"],
        tool_decisions=body["toolDecisions"],
        guidance=body["guidance"],
    )
