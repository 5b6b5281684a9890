"""Request bodies: a DRF input serializer is both the validation and the documented request schema.

``validated_body`` is the one place a serializer's errors become the project's 400: a ``BadRequest``
whose ``errors`` name each bad field (``toolDecisions.call-1.note``), raised before anything is touched;
``json_body`` is the one place an unreadable body becomes one.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

from django.core.validators import ProhibitNullCharactersValidator
from rest_framework import serializers
from rest_framework.exceptions import ParseError, UnsupportedMediaType
from rest_framework.request import Request
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from common.errors import BadRequest


class BodySerializer(serializers.Serializer):
    """An input serializer for a JSON object body. A field it does not declare is an error naming it (a
    misspelt ``contxt`` is never silently dropped) unless listed in ``ignored_fields``; a body that is not
    an object is an error naming ``not_an_object`` (field, message)."""

    ignored_fields: frozenset[str] = frozenset()
    takes_unknown_fields = False  # True only for token login: credentials, nothing is written
    not_an_object: tuple[str, str] = ("body", "not an object")
    unknown_field: str = "unknown field"  # the message naming a field the body does not take

    def get_fields(self) -> dict[str, serializers.Field]:
        """What DRF's own ``get_fields`` gives, a fresh copy of each declared field for this body alone, made
        cheaply: DRF deep-copies every declared field, which builds it again from its arguments (about a
        tenth of a millisecond per field, on every request); here each is a shallow copy of its class's
        prototype (built once, never bound), its child field copied with it."""
        return {name: _fresh(field) for name, field in _prototypes(type(self)).items()}

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            field, message = self.not_an_object
            raise serializers.ValidationError({field: [message]})
        unknown = (
            [] if self.takes_unknown_fields else sorted(set(data) - set(self.fields) - self.ignored_fields)
        )
        errors: dict[str, Any] = {name: [self.unknown_field] for name in unknown}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            errors.update(exc.detail)
        if errors:
            raise serializers.ValidationError(errors)
        return value

    def problem_detail(self, errors: list[dict[str, str]]) -> str:
        """The 400's ``detail``: unknown fields quoted, with the fields the body takes, then each other
        error. A body with its own wording (the decision) overrides it."""
        unknown = [e["field"] for e in errors if e["message"] == self.unknown_field]
        parts = (
            [
                f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(repr(f) for f in unknown)}; "
                f"the body takes {', '.join(self.fields)}"
            ]
            if unknown
            else []
        )
        parts.extend(
            f"{e['field']}: {e['message']}" if e["field"] else e["message"]
            for e in errors
            if e["field"] not in unknown
        )
        return "; ".join(parts)


@functools.cache
def _prototypes(serializer_class: type[BodySerializer]) -> dict[str, serializers.Field]:
    """The class's declared fields, deep-copied once as DRF copies them; never bound, never changed."""
    return copy.deepcopy(serializer_class._declared_fields)


def _fresh(prototype: serializers.Field) -> serializers.Field:
    """A copy of ``prototype`` of its own: binding it (its name, its parent) changes the copy only, and a
    field with a child (a dict's values, a list's items) gets a copy of that child, bound to the copy.
    What the copies still share (arguments, validators, error messages) no field changes once built."""
    field = copy.copy(prototype)
    child = getattr(prototype, "child", None)
    if isinstance(child, serializers.Field):
        field.child = _fresh(child)
        field.child.parent = field
    return field


class TextField(serializers.CharField):
    """A string and nothing else (DRF's CharField would take 5 as "5"). NUL and lone surrogates are
    refused by common.body_rules, in its words, not by DRF's own validators."""

    default_error_messages = {"invalid": "must be a string"}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [
            v
            for v in self.validators
            if not isinstance(v, ProhibitNullCharactersValidator | ProhibitSurrogateCharactersValidator)
        ]

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


def checked_by(rule: Callable[[Any], Any], value: Any) -> Any:
    """``rule(value)``, an existing rule that raises ``BadRequest``, from inside a serializer's
    ``validate_<field>``: its messages become the field's errors, so the rule is not copied."""
    try:
        return rule(value)
    except BadRequest as exc:
        raise serializers.ValidationError(
            [e["message"] for e in exc.extra.get("errors", [])] or [exc.detail]
        ) from None


def field_errors(detail: Any, prefix: str = "") -> list[dict[str, str]]:
    """A serializer's nested errors as ``[{"field", "message"}]``, the field a dotted path."""
    if isinstance(detail, dict):
        out: list[dict[str, str]] = []
        for key, value in detail.items():
            name = "" if key == serializers.api_settings.NON_FIELD_ERRORS_KEY else str(key)
            out.extend(field_errors(value, f"{prefix}.{name}" if prefix and name else prefix or name))
        return out
    if isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            return [{"field": prefix, "message": str(item)} for item in detail]
        out = []
        for index, item in enumerate(detail):
            out.extend(field_errors(item, f"{prefix}[{index}]"))
        return out
    return [{"field": prefix, "message": str(detail)}]


def validated_body(
    serializer_class: type[BodySerializer], data: Any, *, context: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The body's validated data, or a ``BadRequest`` naming each bad field. ``context`` is what a body's
    checks need beyond the body itself (the schedule an update changes, who asks)."""
    serializer = serializer_class(data=data, context=context or {})
    if serializer.is_valid():
        return serializer.validated_data
    errors = field_errors(serializer.errors)
    raise BadRequest(serializer.problem_detail(errors), errors=errors)


def json_body(request: Request, *, required: bool) -> Any:
    """The parsed JSON body; anything unreadable is a 400 naming the body."""
    try:
        data = request.data
    except (ParseError, UnsupportedMediaType) as exc:
        raise BadRequest(
            f"The body must be a JSON object ({exc.detail})",
            errors=[{"field": "body", "message": f"not a JSON object: {exc.detail}"}],
        ) from None
    if not request.body and not required:
        return {}
    if hasattr(data, "dict") and not isinstance(data, dict):  # a QueryDict from an empty/form body
        data = data.dict()
        if not data and required:
            raise BadRequest(
                "The body must be a JSON object", errors=[{"field": "body", "message": "required"}]
            )
    return data
