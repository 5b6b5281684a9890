"""Each request body gets fields of its own (common.request_bodies.BodySerializer.get_fields).

The fields are shallow copies of a prototype per body class, not DRF's deep copies: binding one, or
changing it, must touch that body's copy alone, and a field's child must answer to that body (its
context), never to the prototype or to another request's body.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from approvals.decision_input import DecisionBodySerializer
from common.request_bodies import BodySerializer, validated_body


class _AsksWho(serializers.CharField):
    """A value that is only valid when it names who asks (the body's context)."""

    def to_internal_value(self, data: Any) -> str:
        if data != self.context.get("who"):
            raise serializers.ValidationError(f"not {self.context.get('who')}")
        return data


class _Body(BodySerializer):
    names = serializers.DictField(child=_AsksWho())
    listed = serializers.ListField(child=serializers.DictField(child=_AsksWho()), required=False)


def test_each_body_gets_fields_of_its_own():
    first, second = DecisionBodySerializer(data={}), DecisionBodySerializer(data={})

    first.fields["note"].required = True

    assert second.fields["note"].required is False
    for body in (first, second):
        for name, field in body.fields.items():
            assert field.parent is body and field.field_name == name
        tool_decisions = body.fields["toolDecisions"]
        assert tool_decisions.child.parent is tool_decisions and tool_decisions.child.root is body
    assert first.fields["toolDecisions"].child is not second.fields["toolDecisions"].child


def test_a_fields_child_answers_to_its_own_body_and_its_context():
    assert validated_body(_Body, {"names": {"a": "alice"}}, context={"who": "alice"}) == {
        "names": {"a": "alice"}
    }
    assert validated_body(_Body, {"names": {}, "listed": [{"b": "bob"}]}, context={"who": "bob"})[
        "listed"
    ] == [{"b": "bob"}]

    refused = _Body(data={"names": {"a": "alice"}, "listed": [{"b": "alice"}]}, context={"who": "bob"})
    assert not refused.is_valid()
    assert refused.errors == {"names": {"a": ["not bob"]}, "listed": {0: {"b": ["not bob"]}}}
