"""The regular surface's own errors. The core renders any ApplicationError by its status and code
(common.problems), so a surface error reaches a client through the same one handler."""

from __future__ import annotations

from common.errors import ApplicationError


class NotDeployed(ApplicationError):
    """The agent version a conversation would run on is not deployed (or its agent was deleted)."""

    status = 409
    code = "NOT_DEPLOYED"
    title = "Agent not deployed"
