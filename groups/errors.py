"""The groups app's own errors, rendered by the one exception handler like every ApplicationError."""

from __future__ import annotations

from common.errors import ApplicationError


class ResumeNotStarted(ApplicationError):
    """The decision was taken but its continuation could not start (the group's document changed under
    the paused phase, or a member is no longer deployed): the pause is pending again, deadline unchanged."""

    status = 409
    code = "RESUME_NOT_STARTED"
    title = "Resume not started"
