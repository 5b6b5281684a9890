"""The MCP server: one tool per HITL operation, each a thin async shell around a sync service call.

Every tool reads the authenticated user from the HTTP request that carried it (mcp_surface.identity),
never from an argument, and runs its service call on a worker thread with the database connections
handled as a Django request handles them (closed before and after, so a thread never keeps a broken or
expired one). Answers and errors are JSON (mcp_surface.answers). Arguments EDDI validates
itself (blank ids, verdicts, note length) are checked by the services, after the kill switch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field, ValidationError

from mcp_surface import conversation_tools as conversations
from mcp_surface import group_tools as groups
from mcp_surface import request_tools
from mcp_surface.answers import answer, argument_errors, failure, refusal
from mcp_surface.identity import user_of

INSTRUCTIONS = (
    "Human-in-the-loop approvals. Read the inbox (list_pending_approvals), look at a pause "
    "(get_approval_status) and decide it (resume_conversation) or cancel it. talk_to_agent and "
    "chat_managed drive a conversation; when it pauses they answer PAUSED_FOR_APPROVAL with the tool to "
    "call next. Approval requests (an agent running elsewhere asks for one action): "
    "list_approval_requests, get_approval_request, decide_approval_request (approvers and admins; "
    "approve, reject, reply with guidance or approve an edit) and cancel_approval_request. You act as the owner of your API token; you cannot approve your own request where the "
    "agent forbids self-approval."
)
READ = ToolAnnotations(readOnlyHint=True, idempotentHint=True)
# An approval lets the agent run what it asked for (a transfer, a deletion): destructive, and open world
DECIDE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=True)
ENDS = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False)
# A turn runs the agent's rules and its ungated tools
TALK = ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=True)

ConversationId = Annotated[str, Field(description="The conversation's id (a UUID)")]
GroupId = Annotated[str, Field(description="The group's id (a UUID)")]
DiscussionId = Annotated[str, Field(description="The group discussion's id (a UUID)")]
Verdict = Annotated[str, Field(description="APPROVED or REJECTED (case-insensitive)")]
Note = Annotated[str | None, Field(description="The reviewer's note, at most 4096 characters")]
Limit = Annotated[int | None, Field(description="How many rows at most (1..1000, clamped)")]
Detail = Annotated[
    Literal["summary", "full"] | None,
    Field(description="summary (default) or full: adds the conversation, redacted as reviewers see it"),
]
ToolDecisions = Annotated[
    dict[str, Any] | None,
    Field(
        description="TOOL_CALL pauses: per call id {verdict, note?, amendedArguments?}; calls not named "
        "take the top-level verdict; amendedArguments (an object) approves the call with those arguments. "
        'Example: {"call-1": {"verdict": "APPROVED", "amendedArguments": {"amount": 100}}}'
    ),
]
TaskApprovals = Annotated[
    dict[str, str] | None,
    Field(
        description='TASK pauses: {taskId: "APPROVED"|"REJECTED"}; tasks not named stay awaiting; '
        "omitted or {} approves every awaiting task"
    ),
]
TaskApprovalsJson = Annotated[
    str | None,
    Field(description="The same as taskApprovals, as a JSON string (EDDI's argument); give one of the two"),
]
RequestId = Annotated[str, Field(description="The approval request's id (a UUID)")]
RequestStatus = Annotated[
    str | None,
    Field(
        description="Only requests in this status: PENDING, APPROVED, REJECTED, CANCELLED or EXPIRED "
        "(case-insensitive); omitted: every status"
    ),
]
Guidance = Annotated[
    bool | None,
    Field(
        strict=True,
        description="true: a reply with guidance, a rejection whose note is the agent's instruction; needs "
        "verdict REJECTED and a note (and a request whose hitlConfig allows a reply)",
    ),
]
AmendedArguments = Annotated[
    dict[str, Any] | None,
    Field(description="Approve with these arguments instead (a JSON object); needs verdict APPROVED"),
]
AmendedRequest = Annotated[
    dict[str, Any] | None,
    Field(
        description="A pinned request only: the parts to change ({method, url, headers, body}); the headers "
        "the agent marked secret stay as it sent them and cannot be named. Needs verdict APPROVED"
    ),
]
Message = Annotated[str, Field(description="What to say to the agent (at most 16384 characters)")]
Environment = Annotated[
    Literal["production", "test"] | None, Field(description="Where the agent is deployed (production)")
]


async def _run(ctx: Context, service: Callable[..., dict[str, Any]], **arguments: Any) -> CallToolResult:
    user = user_of(ctx.request_context.request)
    return await sync_to_async(_call, thread_sensitive=False)(service, user, arguments)


def _call(service: Callable[..., dict[str, Any]], user: Any, arguments: dict[str, Any]) -> CallToolResult:
    close_old_connections()
    try:
        return answer(service(user, **arguments))
    except Exception as exc:  # every failure is a structured answer; nothing raw reaches the client
        return failure(exc)
    finally:
        close_old_connections()


class ApprovalsServer(MCPServer):
    """The SDK's server, its argument errors answered as every other refusal is: ``errorCode``
    BAD_REQUEST with each field and what is wrong (the SDK's own answer is pydantic's text, the values
    sent included), so a client branches on the code and a model reads what to fix."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            return refusal(argument_errors(exc.__cause__))


def build_server() -> MCPServer:
    server = ApprovalsServer(name="hitl-approvals", instructions=INSTRUCTIONS)
    _add_conversation_tools(server)
    _add_group_tools(server)
    _add_talk_tools(server)
    _add_request_tools(server)
    refuse_unknown_arguments(server)
    return server


def _add_conversation_tools(server: MCPServer) -> None:
    """The 1:1 conversations' inbox, status, decision and cancel."""

    @server.tool(annotations=READ)
    async def list_pending_approvals(ctx: Context, limit: Limit = None) -> CallToolResult:
        """Pending 1:1 approvals you may decide, what is due first (by deadline, those without one last,
        then oldest first): yours, or every one for approvers and admins. Each row says what is asked:
        pauseReason, pauseType and toolNames, agentName, and latestInput (the requester's last message,
        one line). Default limit 200."""
        return await _run(ctx, conversations.list_pending_approvals, limit=limit)

    @server.tool(annotations=READ)
    async def get_approval_status(
        ctx: Context, conversationId: ConversationId, detail: Detail = None
    ) -> CallToolResult:  # the wire names
        """A conversation's pause: state, reason, pauseType (RULE or TOOL_CALL), deadline, pauseDetails
        with the gated calls' redacted arguments, and the last decision."""
        return await _run(
            ctx, conversations.get_approval_status, conversation_id=conversationId, detail=detail
        )

    @server.tool(annotations=DECIDE)
    async def resume_conversation(
        ctx: Context,
        conversationId: ConversationId,
        verdict: Verdict,
        note: Note = None,
        toolDecisions: ToolDecisions = None,
    ) -> CallToolResult:
        """Decide a paused conversation; one verdict resolves a RULE or a TOOL_CALL pause (toolDecisions
        decide calls one by one). Answers once the conversation continued, with its new state."""
        return await _run(
            ctx,
            conversations.resume_conversation,
            conversation_id=conversationId,
            verdict=verdict,
            note=note,
            tool_decisions=toolDecisions,
        )

    @server.tool(annotations=ENDS)
    async def cancel_conversation(ctx: Context, conversationId: ConversationId) -> CallToolResult:
        """Cancel a pending approval (CANCELLED) or a running turn (CANCEL_REQUESTED)."""
        return await _run(ctx, conversations.cancel_conversation, conversation_id=conversationId)


def _add_group_tools(server: MCPServer) -> None:
    """The group discussions' inboxes, status, decision and cancel."""

    @server.tool(annotations=READ)
    async def list_group_pending_approvals(
        ctx: Context, groupId: GroupId, limit: Limit = None
    ) -> CallToolResult:
        """Pending approvals of one group's discussions you may decide, what is due first; each row with
        groupName and latestInput (the discussion's question). Default limit 100."""
        return await _run(ctx, groups.list_group_pending_approvals, group_id=groupId, limit=limit)

    @server.tool(annotations=READ)
    async def list_all_group_pending_approvals(ctx: Context, limit: Limit = None) -> CallToolResult:
        """Pending approvals of every group's discussions you may decide, what is due first; each row with
        groupName and latestInput (the discussion's question). Default limit 100."""
        return await _run(ctx, groups.list_all_group_pending_approvals, limit=limit)

    @server.tool(annotations=READ)
    async def get_group_approval_status(
        ctx: Context,
        groupId: GroupId,
        conversationId: DiscussionId,
        detail: Detail = None,
    ) -> CallToolResult:
        """A discussion's pause: phase, PHASE or TASK, the tasks awaiting approval, deadline, last
        decision; detail=full adds the discussion (its transcript and tasks)."""
        return await _run(
            ctx,
            groups.get_group_approval_status,
            group_id=groupId,
            conversation_id=conversationId,
            detail=detail,
        )

    @server.tool(annotations=DECIDE)
    async def approve_group_phase(
        ctx: Context,
        groupId: GroupId,
        conversationId: DiscussionId,
        verdict: Verdict,
        note: Note = None,
        taskApprovals: TaskApprovals = None,
        taskApprovalsJson: TaskApprovalsJson = None,
    ) -> CallToolResult:
        """Decide a paused discussion; it resumes before the answer, which is the resumed discussion."""
        return await _run(
            ctx,
            groups.approve_group_phase,
            group_id=groupId,
            conversation_id=conversationId,
            verdict=verdict,
            note=note,
            task_approvals=taskApprovals,
            task_approvals_json=taskApprovalsJson,
        )

    @server.tool(annotations=ENDS)
    async def cancel_group_discussion(
        ctx: Context,
        groupId: GroupId,
        conversationId: DiscussionId,
    ) -> CallToolResult:
        """Cancel a discussion: a pending approval at once, a running one before its next member turn."""
        return await _run(
            ctx, groups.cancel_group_discussion, group_id=groupId, conversation_id=conversationId
        )


def _add_talk_tools(server: MCPServer) -> None:
    """Talking to an agent (a turn: off with the kill switch, like the decisions)."""

    @server.tool(annotations=TALK)
    async def talk_to_agent(
        ctx: Context,
        message: Message,
        agentId: Annotated[str | None, Field(description="Start a new conversation with this agent")] = None,
        conversationId: Annotated[
            str | None, Field(description="Or continue this conversation of yours")
        ] = None,
        environment: Environment = None,
    ) -> CallToolResult:
        """Say something to an agent. Answers {status: OK, output} or, when the agent pauses for a human,
        {status: PAUSED_FOR_APPROVAL, conversationId, reason, pauseType, tools, suggestNextTool}."""
        return await _run(
            ctx,
            conversations.talk_to_agent,
            message=message,
            agent_id=agentId,
            conversation_id=conversationId,
            environment=environment,
        )

    @server.tool(annotations=TALK)
    async def chat_managed(
        ctx: Context,
        message: Message,
        agentId: Annotated[str | None, Field(description="The agent to chat with")] = None,
        environment: Environment = None,
        intent: Annotated[
            str | None, Field(description="Instead of agentId: an intent of the agent triggers (as EDDI's)")
        ] = None,
        userId: Annotated[str | None, Field(description="With intent: your own user name, if given")] = None,
    ) -> CallToolResult:
        """Chat in your one running conversation, kept by the server: with an agent (the newest that has
        not ended, pinned while it awaits approval), or for an intent (your managed conversation for it).
        Answers like talk_to_agent."""
        return await _run(
            ctx,
            conversations.chat_managed,
            agent_id=agentId,
            message=message,
            environment=environment,
            intent=intent,
            user_id=userId,
        )


def _add_request_tools(server: MCPServer) -> None:
    """Approval requests: list, read, decide, cancel."""

    @server.tool(annotations=READ)
    async def list_approval_requests(
        ctx: Context, status: RequestStatus = None, limit: Limit = None
    ) -> CallToolResult:
        """Approval requests of agents running elsewhere, newest first: every one for approvers and
        admins, those made on your behalf otherwise. Default limit 100."""
        return await _run(ctx, request_tools.list_approval_requests, status=status, limit=limit)

    @server.tool(annotations=READ)
    async def get_approval_request(ctx: Context, requestId: RequestId) -> CallToolResult:
        """One approval request: agent, action and arguments, reason, the pinned HTTP request (secret header
        values never shown), deadline, decision, grant and claim."""
        return await _run(ctx, request_tools.get_approval_request, request_id=requestId)

    @server.tool(annotations=DECIDE)
    async def decide_approval_request(
        ctx: Context,
        requestId: RequestId,
        verdict: Verdict,
        note: Note = None,
        guidance: Guidance = None,
        amendedArguments: AmendedArguments = None,
        amendedRequest: AmendedRequest = None,
    ) -> CallToolResult:
        """Decide a pending approval request (approvers and admins): approve, reject, reject with guidance,
        or approve an edit of its arguments or pinned request. Answers the request as decided."""
        return await _run(
            ctx,
            request_tools.decide_approval_request,
            request_id=requestId,
            verdict=verdict,
            note=note,
            guidance=guidance,
            amended_arguments=amendedArguments,
            amended_request=amendedRequest,
        )

    @server.tool(annotations=ENDS)
    async def cancel_approval_request(ctx: Context, requestId: RequestId) -> CallToolResult:
        """Withdraw an approval request (the person it was made for, approvers and admins): a pending one,
        or an approved one nobody claimed yet, ends CANCELLED."""
        return await _run(ctx, request_tools.cancel_approval_request, request_id=requestId)


def refuse_unknown_arguments(server: MCPServer) -> None:
    """A tool call with an argument the tool does not declare is refused naming it ("Extra inputs are not
    permitted"), as a REST body's unknown field is (S2): the SDK's argument models drop extras silently
    by default, so a misspelt ``notes`` or a ``decidedBy`` would vanish. The advertised input schema says
    so too (``additionalProperties: false``). The SDK keeps its tools in ``_tool_manager``: no public
    accessor gives the argument models."""
    for tool in server._tool_manager.list_tools():
        model = tool.fn_metadata.arg_model
        model.model_config["extra"] = "forbid"
        model.model_rebuild(force=True)
        tool.parameters["additionalProperties"] = False
