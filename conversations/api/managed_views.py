"""REST adapters for managed conversations (conversations.managed): EDDI's agent trigger store and its
``/agents/managed/{intent}/{userId}`` endpoints. Each view: parse, authorize, call a service."""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from django.http import HttpResponse, JsonResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer, extend_schema_view
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.actors import actor_for_user
from approvals.api.permissions import AdminOnly
from common.body_rules import context_size_problem
from common.errors import NotFound
from common.request_bodies import BodySerializer, TextField, json_body, validated_body
from common.throttles import TURNS, Throttled, TurnRateThrottle, count_request
from conversations import managed
from conversations.agents import live_agent
from conversations.api.conversation_views import SNAPSHOT, ConversationView, cancel_answer
from conversations.models import AgentTrigger, Environment
from conversations.snapshots import snapshot

INTENT_MAX = 100
DEPLOYMENTS_MAX = 100
CANCEL_ANSWER_COMPONENT = "CancelAnswer"  # what endConversation answers (EndView)
CONTEXT_TYPES = ("string", "expressions", "object")
_INTENT_CHARACTERS = RegexValidator(
    r"^[A-Za-z0-9_.-]+$", message="may hold only the characters A-Z a-z 0-9 _ . -"
)


def _intent_field(**kwargs: Any) -> TextField:
    return TextField(
        min_length=1,
        max_length=INTENT_MAX,
        validators=[_INTENT_CHARACTERS],
        help_text="The intent: 1 to 100 of A-Z a-z 0-9 _ . -",
        **kwargs,
    )


@extend_schema_serializer(component_name="TriggerContextValue")
class ContextValueSerializer(BodySerializer):
    """An ``initialContext`` entry as EDDI writes it; the start's context holds its plain ``value``."""

    not_an_object = ("", 'must be an object {"type", "value"}')

    type = serializers.ChoiceField(
        CONTEXT_TYPES, error_messages={"invalid_choice": "must be string, expressions or object"}
    )
    value = serializers.JSONField(
        help_text="a string for string and expressions, an object or list for object"
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        value = attrs["value"]
        if attrs["type"] == "object" and not isinstance(value, dict | list):
            raise serializers.ValidationError({"value": ["must be an object or a list for type object"]})
        if attrs["type"] != "object" and not isinstance(value, str):
            raise serializers.ValidationError({"value": [f"must be a string for type {attrs['type']}"]})
        return attrs


class IndexedErrorsList(serializers.ListSerializer):
    """A list whose items' errors are named by position, ``agentDeployments[0].agentId``, as every other
    list error is (DRF reports them as a dict keyed by the index)."""

    def to_internal_value(self, data: Any) -> list[Any]:
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as exc:
            detail = exc.detail
            if isinstance(detail, dict) and detail and all(isinstance(key, int) for key in detail):
                raise serializers.ValidationError([detail.get(i, {}) for i in range(len(data))]) from None
            raise


@extend_schema_serializer(component_name="TriggerAgentDeployment")
class AgentDeploymentSerializer(BodySerializer):
    """One deployment a conversation for the intent may start with: an agent, the environment whose
    newest deployed version it starts on, and the context it starts with."""

    not_an_object = ("", "must be an object")

    class Meta:
        list_serializer_class = IndexedErrorsList

    environment = serializers.ChoiceField(
        Environment.values,
        required=False,
        default=Environment.PRODUCTION,
        error_messages={"invalid_choice": "must be production or test"},
    )
    agentId = TextField(min_length=1, max_length=64, help_text="An existing agent's id")
    initialContext = serializers.DictField(
        child=ContextValueSerializer(),
        required=False,
        default=dict,
        error_messages={"not_a_dict": "must be an object"},
        help_text='Context the conversation starts with: {name: {"type", "value"}}; the start\'s context '
        "holds each plain value (at most HITL_CONTEXT_MAX_BYTES of JSON)",
    )

    def validate_agentId(self, value: str) -> str:
        try:
            return str(live_agent(value).pk)
        except NotFound:
            raise serializers.ValidationError("no agent with this id") from None

    def validate_initialContext(self, value: dict[str, Any]) -> dict[str, Any]:
        problem = context_size_problem(managed.start_context({"initialContext": value}))
        if problem is not None:
            raise serializers.ValidationError(problem)
        return value


def _deployments_field() -> AgentDeploymentSerializer:
    return AgentDeploymentSerializer(
        many=True,
        allow_empty=False,
        max_length=DEPLOYMENTS_MAX,
        error_messages={"empty": "name at least one agent deployment", "not_a_list": "must be a list"},
        help_text="One is picked at random for each new conversation",
    )


@extend_schema_serializer(component_name="AgentTriggerConfiguration")
class TriggerInputSerializer(BodySerializer):
    """The body of POST: EDDI's AgentTriggerConfiguration; any other field is a 400 naming it."""

    intent = _intent_field()
    agentDeployments = _deployments_field()


@extend_schema_serializer(component_name="AgentTriggerReplacement")
class TriggerReplacementSerializer(BodySerializer):
    """The body of PUT: the configuration; its ``intent``, when given, must be the path's."""

    intent = _intent_field(required=False)
    agentDeployments = _deployments_field()

    def validate_intent(self, value: str) -> str:
        if value != self.context["intent"]:
            raise serializers.ValidationError(f"must be the intent of the path ('{self.context['intent']}')")
        return value


@extend_schema_serializer(component_name="AgentTriggerDeployment")
class DeploymentOutputSerializer(serializers.Serializer):
    environment = serializers.ChoiceField(Environment.values)
    agentId = serializers.CharField()
    initialContext = serializers.DictField(
        child=serializers.DictField(), help_text='{name: {"type", "value"}}'
    )


@extend_schema_serializer(component_name="AgentTrigger")
class TriggerOutputSerializer(serializers.Serializer):
    """A trigger as stored: EDDI's AgentTriggerConfiguration."""

    intent = serializers.CharField()
    agentDeployments = DeploymentOutputSerializer(many=True)


def _stored(deployments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "environment": d["environment"],
            "agentId": d["agentId"],
            "initialContext": {
                name: {"type": entry["type"], "value": entry["value"]}
                for name, entry in d["initialContext"].items()
            },
        }
        for d in deployments
    ]


def _shown(trigger: AgentTrigger) -> dict[str, Any]:
    return {"intent": trigger.intent, "agentDeployments": trigger.agent_deployments}


def _location(intent: str) -> str:
    return f"/AgentTriggerStore/agenttriggers/{intent}"


class TriggerListView(APIView):
    permission_classes = [AdminOnly]

    @extend_schema(
        summary="List agent triggers (EDDI's AgentTriggerStore)", responses=TriggerOutputSerializer(many=True)
    )
    def get(self, request: Request) -> Response:
        return Response([_shown(trigger) for trigger in managed.trigger_list()])

    @extend_schema(
        summary="Create an agent trigger (409 when the intent has one)",
        request=TriggerInputSerializer,
        responses={201: TriggerOutputSerializer},
    )
    def post(self, request: Request) -> Response:
        body = validated_body(TriggerInputSerializer, json_body(request, required=True))
        trigger = managed.trigger_create(
            intent=body["intent"], agent_deployments=_stored(body["agentDeployments"])
        )
        response = Response(_shown(trigger), status=status.HTTP_201_CREATED)
        response["Location"] = _location(trigger.intent)
        return response


class TriggerDetailView(APIView):
    permission_classes = [AdminOnly]

    @extend_schema(summary="Read an agent trigger", responses=TriggerOutputSerializer)
    def get(self, request: Request, intent: str) -> Response:
        return Response(_shown(managed.trigger_for(intent=intent)))

    @extend_schema(
        summary="Replace an agent trigger (the body's intent, if given, must be the path's)",
        request=TriggerReplacementSerializer,
        responses=TriggerOutputSerializer,
    )
    def put(self, request: Request, intent: str) -> Response:
        body = validated_body(
            TriggerReplacementSerializer, json_body(request, required=True), context={"intent": intent}
        )
        trigger = managed.trigger_replace(intent=intent, agent_deployments=_stored(body["agentDeployments"]))
        return Response(_shown(trigger))

    @extend_schema(
        summary="Delete an agent trigger (none to delete is 200 too); mapped conversations stay",
        responses={200: None},
    )
    def delete(self, request: Request, intent: str) -> Response:
        managed.trigger_delete(intent=intent)
        return Response(status=status.HTTP_200_OK)


# --- /agents/managed/{intent}/{userId} ------------------------------------------------------------------


class ManagedConversationView(APIView):
    throttle_classes = [TurnRateThrottle]  # its say; a read that starts a conversation counts as a turn

    @extend_schema(
        summary="The caller's conversation for an intent (started when there is none or it ended; "
        "userId must be the caller's own user name)",
        responses=SNAPSHOT,
    )
    def get(self, request: Request, intent: str, user_id: str) -> Response:
        managed.require_own_user_id(request.user, user_id)
        current = managed.current_conversation(
            user=request.user,
            intent=intent,
            before_start=lambda: _count_as_a_turn(request.user),
        )
        return Response(snapshot(current.conversation, steps=current.steps))

    @extend_schema(
        summary="Say something to the caller's conversation for an intent (started first when there is "
        "none or it ended; 409 while it awaits approval, and it stays the intent's conversation)",
        request=ConversationView.InputSerializer,
        responses=SNAPSHOT,
    )
    def post(self, request: Request, intent: str, user_id: str) -> Response:
        body = validated_body(ConversationView.InputSerializer, json_body(request, required=True))
        managed.require_own_user_id(request.user, user_id)
        said = managed.say_to_intent(
            user=request.user, intent=intent, user_input=body["input"], context=body["context"] or {}
        )
        return Response(snapshot(said.conversation, steps=said.steps))


def _count_as_a_turn(user: Any) -> None:
    """A read that starts a conversation runs a turn: it counts against the turn rate as a start does,
    and over it is the same 429 with ``Retry-After``."""
    try:
        count_request(user=user, scope=TURNS)
    except Throttled as exc:
        raise exceptions.Throttled(wait=exc.extra["retryAfter"]) from None


class ManagedEndView(APIView):
    @extend_schema(
        summary="End the caller's conversation for an intent (null when there was none to end)",
        request=None,
        responses=OpenApiResponse(
            {"allOf": [{"$ref": f"#/components/schemas/{CANCEL_ANSWER_COMPONENT}"}], "nullable": True},
            description="The ended conversation's snapshot (as endConversation answers it), or null",
        ),
    )
    def post(self, request: Request, intent: str, user_id: str) -> HttpResponse:
        managed.require_own_user_id(request.user, user_id)
        ended = managed.end_for_intent(user=request.user, intent=intent, actor=actor_for_user(request.user))
        if ended is None:  # nothing to end is a 200 too, as in EDDI; DRF would render None as no body
            return JsonResponse(None, safe=False)
        return Response(cancel_answer(ended))


class _ManagedStepView(APIView):
    """Undo or redo of the caller's conversation for an intent: ``GET`` whether it would succeed now,
    ``POST`` doing it. ``available`` and ``move`` are the services (conversations.managed)."""

    available: Any
    move: Any

    def get(self, request: Request, intent: str, user_id: str) -> Response:
        managed.require_own_user_id(request.user, user_id)
        return Response(type(self).available(user=request.user, intent=intent))

    def post(self, request: Request, intent: str, user_id: str) -> Response:
        managed.require_own_user_id(request.user, user_id)
        return Response(snapshot(type(self).move(user=request.user, intent=intent)))


def _step_schema(step: str) -> Any:
    return extend_schema_view(
        get=extend_schema(
            summary=f"Whether {step} would succeed now (JSON true or false)", responses=OpenApiTypes.BOOL
        ),
        post=extend_schema(
            summary=f"{step.capitalize()} (404 without a conversation for the intent; 409 while awaiting "
            "approval or running)",
            request=None,
            responses=SNAPSHOT,
        ),
    )


@_step_schema("an undo of the last step")
class ManagedUndoView(_ManagedStepView):
    available = staticmethod(managed.undo_available)
    move = staticmethod(managed.undo_for_intent)


@_step_schema("a redo of the last undone step")
class ManagedRedoView(_ManagedStepView):
    available = staticmethod(managed.redo_available)
    move = staticmethod(managed.redo_for_intent)
