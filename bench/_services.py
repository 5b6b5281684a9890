"""The cycle's three requests as the service calls the views make, in this process: no HTTP, no DRF.

The peer's in-process figure (bench/peer/graph.py) calls ``graph.invoke`` directly, with no web
framework; this is ours at the same level. Each call does what its view does after parsing:
the access check (``talk_on_version``; ``decide_conversation`` makes its own), the service
(``start_conversation``, ``say``, ``decide_conversation``) and the snapshot it answers with. What
it leaves out is the request itself: routing, authentication (the user and their roles are read once
per client, not per request), DRF's parsing and rendering, the middleware.

It answers the part of httpx.Client's interface the bench uses (``post(url, json=, params=)``), so
cycles.py runs the same cycle through it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

ROUTE = re.compile(r"^/agents/(?P<id>[^/]+)(?P<action>/start|/resume)?$")


@dataclass
class Answer:
    status_code: int
    body: Any

    @property
    def text(self) -> str:
        return str(self.body)

    def json(self) -> Any:
        return self.body


class ServicesClient:
    def __init__(self, token: str) -> None:
        from rest_framework.authtoken.models import Token

        from approvals.access import remember_group_names

        self.user = Token.objects.select_related("user").get(key=token).user
        remember_group_names(self.user, self.user.groups.values_list("name", flat=True))

    def post(self, url: str, json: dict | None = None, params: dict | None = None) -> Answer:
        from common.errors import ApplicationError

        match = ROUTE.match(url)
        if match is None:
            raise ValueError(f"no service behind {url}")
        try:
            if match["action"] == "/start":
                return Answer(201, self._start(match["id"], (params or {}).get("environment", "production")))
            if match["action"] == "/resume":
                return Answer(200, self._resume(match["id"], json or {}))
            return Answer(200, self._say(match["id"], (json or {})["input"]))
        except ApplicationError as error:
            return Answer(error.status, {"detail": error.detail})

    def _start(self, agent_id: str, environment: str) -> dict[str, Any]:
        from conversations import turns
        from conversations.snapshots import snapshot

        started = turns.start_conversation(
            user=self.user, agent_id=agent_id, environment=environment, context={}
        )
        return snapshot(started.conversation, steps=started.steps)

    def _say(self, conversation_id: str, text: str) -> dict[str, Any]:
        from conversations import turns
        from conversations.selectors import talk_on_version
        from conversations.snapshots import snapshot

        said = turns.say(
            conversation=talk_on_version(self.user, conversation_id),
            user=self.user,
            user_input=text,
            context={},
        )
        return snapshot(said.conversation, steps=said.steps)

    def _resume(self, conversation_id: str, body: dict[str, Any]) -> dict[str, Any]:
        from conversations.conversation_decisions import continued_snapshot, decide_conversation

        continued = decide_conversation(user=self.user, conversation_id=conversation_id, body=body)
        return continued_snapshot(continued)
