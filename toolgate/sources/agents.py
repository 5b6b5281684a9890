"""Agent tools: talk to another deployed agent in a nested conversation.

``a2a_tools(targets)`` (source ``a2a``): one tool per configured target ``{"name", "agentId",
"description"}``, named ``name``, taking ``{"message": str}`` and optionally ``{"conversationId": str}``
to continue a conversation it started earlier. ``dynamic_tools()`` (source ``dynamic``):
``talkToAgent(agentId, message)`` starts a conversation with any deployed agent, and
``continueAgentConversation(conversationId, message)`` says something more in one started earlier.

Contract of ``ToolContext.talk_to_agent`` (implemented by conversations; every tool here passes its
answer through unchanged)::

    talk_to_agent(*, agent_id: str | None, message: str, conversation_id: str | None) -> dict

- ``conversation_id`` None: start a conversation on the deployed agent ``agent_id`` as the caller and
  say ``message``; otherwise say ``message`` in that conversation (``agent_id`` is None from
  ``continueAgentConversation``, the target's agent id from an a2a tool).
- The answer is a JSON-able dict, never an exception. When the nested conversation answered:
  ``{"status": "OK", "conversationId", "conversationState", "output"}``. When it PAUSED for a human
  decision, the shape of the HITL tools, and the nested approval stays pending::

      {"status": "PAUSED_FOR_APPROVAL", "conversationId": "<nested id>",
       "conversationState": "AWAITING_HUMAN", "reason": "<its pause reason>",
       "suggestNextTool": "resume_conversation",
       "message": "<what to tell the user: the other agent waits for a human approval>"}

  optionally with ``"pauseType": "TOOL_CALL", "tools": [names]`` for a tool-call pause. When it could
  not be reached or used: ``{"status": "NOT_EXECUTED", "reason": "…"}``.

Without the callable (a context that cannot start conversations), or with bad arguments, a tool
answers the same ``NOT_EXECUTED`` shape itself.
"""

from __future__ import annotations

from typing import Any

from toolgate.tools import Tool, ToolContext

UNAVAILABLE = {"status": "NOT_EXECUTED", "reason": "talking to other agents is not available here"}
PAUSED_FOR_APPROVAL = "PAUSED_FOR_APPROVAL"
_MESSAGE = {"type": "string", "description": "What to say to the agent"}


def a2a_tools(targets: list[dict[str, Any]]) -> list[Tool]:
    return [
        _a2a_tool(target)
        for target in targets
        if isinstance(target, dict) and target.get("name") and target.get("agentId")
    ]


def _a2a_tool(target: dict[str, Any]) -> Tool:
    agent_id = str(target["agentId"])

    def run(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        conversation_id = args.get("conversationId")
        return _talk(
            ctx,
            agent_id=agent_id,
            message=args.get("message"),
            conversation_id=conversation_id if isinstance(conversation_id, str) and conversation_id else None,
        )

    return Tool(
        name=str(target["name"]),
        source="a2a",
        description=str(target.get("description") or f"Talk to the agent {agent_id}."),
        parameters={
            "type": "object",
            "properties": {
                "message": _MESSAGE,
                "conversationId": {
                    "type": "string",
                    "description": "Continue the conversation with this id (from an earlier answer)",
                },
            },
            "required": ["message"],
        },
        run=run,
    )


def _talk_to_agent(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    agent_id = args.get("agentId")
    if not isinstance(agent_id, str) or not agent_id.strip():
        return _not_executed("'agentId' must be a non-empty string")
    return _talk(ctx, agent_id=agent_id, message=args.get("message"), conversation_id=None)


def _continue_conversation(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    conversation_id = args.get("conversationId")
    if not isinstance(conversation_id, str) or not conversation_id.strip():
        return _not_executed("'conversationId' must be a non-empty string")
    return _talk(ctx, agent_id=None, message=args.get("message"), conversation_id=conversation_id)


def _talk(
    ctx: ToolContext, *, agent_id: str | None, message: Any, conversation_id: str | None
) -> dict[str, Any]:
    if not isinstance(message, str):
        return _not_executed("'message' must be a string")
    if ctx.talk_to_agent is None:
        return UNAVAILABLE
    return ctx.talk_to_agent(agent_id=agent_id, message=message, conversation_id=conversation_id)


def _not_executed(reason: str) -> dict[str, Any]:
    return {"status": "NOT_EXECUTED", "reason": reason}


def dynamic_tools() -> list[Tool]:
    return [
        Tool(
            name="talkToAgent",
            source="dynamic",
            description="Start a conversation with another deployed agent and say a message to it.",
            parameters={
                "type": "object",
                "properties": {
                    "agentId": {"type": "string", "description": "The agent's id"},
                    "message": _MESSAGE,
                },
                "required": ["agentId", "message"],
            },
            run=_talk_to_agent,
        ),
        Tool(
            name="continueAgentConversation",
            source="dynamic",
            description=(
                "Say another message in a conversation with an agent started earlier (for instance once "
                "a paused conversation was approved)."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "conversationId": {"type": "string", "description": "The conversation's id"},
                    "message": _MESSAGE,
                },
                "required": ["conversationId", "message"],
            },
            run=_continue_conversation,
        ),
    ]
