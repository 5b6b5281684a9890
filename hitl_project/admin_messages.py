"""Django's messages for the admin only.

The admin is the one part of the service that shows messages (a decision's outcome, a bulk action's
result). Setting up the message storage (a cookie storage and a session storage, read back on the
answer) cost every REST request about 17 µs of CPU for nothing (``bench/request_overhead.py``'s
plain-view probe, with and without it), so the storage is set up for requests under ``ADMIN_PATH``
only. Elsewhere ``request._messages`` is never set: the ``messages`` context processor then gives no
messages, and adding one raises ``MessageFailure``, as it does without the middleware.
"""

from __future__ import annotations

from django.contrib.messages.middleware import MessageMiddleware
from django.http import HttpRequest

ADMIN_PATH = "/admin/"


class AdminMessageMiddleware(MessageMiddleware):
    def process_request(self, request: HttpRequest) -> None:
        if request.path_info.startswith(ADMIN_PATH):
            super().process_request(request)
