"""The demo agent "account-bot": the one copy of its document.

``manage.py hitl_demo`` deploys it, the tests build their account bot from it, and the docs point here
rather than paste it. Saying "delete my account" to it pauses the conversation for a human decision
(someone other than the requester must decide); "hello" gets a greeting.
"""

from __future__ import annotations

import copy
from typing import Any

DEMO_AGENT_NAME = "account-bot"

# A plain agent document (an llm task with gated tools), plus a greeting rule and separation of duties.
DEMO_AGENT_DOCUMENT: dict[str, Any] = {
    "name": DEMO_AGENT_NAME,
    "workflows": [
        {
            "id": "main",
            "tasks": [
                {
                    "id": "parse",
                    "type": "parser",
                    "dictionaries": [
                        {"phrase": "delete my account", "expressions": "delete_account(me)"},
                        {"word": "hello", "expressions": "greeting(hello)"},
                    ],
                },
                {
                    "id": "rules",
                    "type": "behavior_rules",
                    "rules": [
                        {
                            "name": "Pause for deletion approval",
                            "actions": ["PAUSE_CONVERSATION", "confirm_deletion"],
                            "conditions": [
                                {"type": "inputmatcher", "configs": {"expressions": "delete_account(*)"}}
                            ],
                        },
                        {
                            "name": "Greet",
                            "actions": ["say_hello"],
                            "conditions": [
                                {"type": "inputmatcher", "configs": {"expressions": "greeting(*)"}}
                            ],
                        },
                    ],
                },
                {
                    "id": "output",
                    "type": "output",
                    "outputs": [
                        {"action": "confirm_deletion", "texts": ["Deletion {memory.current.hitlDecision}."]},
                        {
                            "action": "say_hello",
                            "texts": ["Hello! Ask me to delete your account to see an approval gate."],
                        },
                    ],
                },
                {"id": "templating", "type": "templating"},
            ],
        }
    ],
    "hitlConfig": {
        "approvalTimeout": "PT15M",
        "timeoutPolicy": "AUTO_REJECT",
        "pauseReason": "Account deletion requires manager sign-off",
        # A manager sign-off: alice may cancel her own request, only someone else may decide it.
        "allowSelfApproval": False,
    },
}


def demo_agent_document() -> dict[str, Any]:
    """A fresh copy of the demo agent's document, free to change."""
    return copy.deepcopy(DEMO_AGENT_DOCUMENT)
