"""An agent running elsewhere, as a process of its own: it claims one approved request over HTTP, executes
exactly the approved request against its target, and reports the outcome, as docs/approval-requests.md
tells a service account to. Run as ``python -m harnesses.claiming_agent`` by tests/e2e/test_live_claim_crash.py,
which SIGKILLs it at a chosen step and runs it again.

Each step is written to ``--state-dir`` (and fsynced) as it is reached, so the killer knows where the
process is: ``claiming`` (the claim is sent), ``claim.json`` (its answer: status and body), ``executed``
(the target answered), ``outcome.json``. With ``--stop-after STEP`` the process waits there to be
killed (``claiming``: the claim was written to the socket and its answer is never read); without it,
it goes on to the end.

A restarted agent does what the API asks of it: a claim refused ``OUTCOME_UNKNOWN`` means the first
claimant may have executed it, so it executes nothing and exits (code 3), leaving a person to find out
what happened; any other refusal exits 4. Only the standard library and httpx: no Django here.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

STEPS = ("claiming", "claimed", "executed")
REFUSED_OUTCOME_UNKNOWN, REFUSED = 3, 4


def mark(state_dir: Path, name: str, content: Any = "") -> None:
    path = state_dir / name
    temporary = path.with_suffix(".tmp")
    with open(temporary, "w") as handle:
        handle.write(content if isinstance(content, str) else json.dumps(content))
        handle.flush()
        os.fsync(handle.fileno())
    temporary.rename(path)  # a reader never sees half a file


def wait_to_be_killed(stop_after: str | None, step: str) -> None:
    if stop_after == step:
        while True:
            time.sleep(60)


def _send_without_reading(base_url: str, token: str, path: str, body: dict[str, Any]) -> socket.socket:
    """The claim written to the server's socket, its answer never read (the process dies first)."""
    parts = urlsplit(base_url)
    payload = json.dumps(body).encode("utf-8")
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Token {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    )
    connection = socket.create_connection((parts.hostname, parts.port), timeout=30)
    connection.sendall(head.encode("ascii") + payload)
    return connection


def run(
    base_url: str,
    token: str,
    request_id: str,
    pinned: dict[str, Any],
    state_dir: Path,
    stop_after: str | None,
) -> int:
    claim_path = f"/approval-requests/{request_id}/claim"
    if stop_after == "claiming":
        _kept = _send_without_reading(base_url, token, claim_path, {"request": pinned})
        mark(state_dir, "claiming")
        wait_to_be_killed(stop_after, "claiming")
    api = httpx.Client(base_url=base_url, headers={"Authorization": f"Token {token}"}, timeout=30.0)
    mark(state_dir, "claiming")
    answer = api.post(claim_path, json={"request": pinned})
    mark(state_dir, "claim.json", {"status": answer.status_code, "body": answer.json()})
    if answer.status_code != 200:
        code = answer.json().get("code")
        return REFUSED_OUTCOME_UNKNOWN if code == "OUTCOME_UNKNOWN" else REFUSED
    wait_to_be_killed(stop_after, "claimed")
    grant = answer.json()["grant"]
    approved = grant["request"]  # exactly what was approved; the secret headers' values are our own
    headers = {name: pinned["headers"].get(name, value) for name, value in approved["headers"].items()}
    executed = httpx.request(
        approved["method"],
        approved["url"],
        headers={**headers, "X-Grant-Token": grant["token"]},
        content=(approved["body"] or "").encode("utf-8"),
        timeout=30.0,
    )
    mark(state_dir, "executed", str(executed.status_code))
    wait_to_be_killed(stop_after, "executed")
    reported = api.post(
        f"/approval-requests/{request_id}/outcome",
        json={"status": "succeeded" if executed.is_success else "failed", "httpStatus": executed.status_code},
    )
    mark(state_dir, "outcome.json", {"status": reported.status_code, "body": reported.json()})
    return 0 if reported.status_code == 200 else REFUSED


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--request-id", required=True)
    parser.add_argument("--pinned", required=True, help="a file: the pinned request, secret headers included")
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--stop-after", choices=STEPS, default=None, help="wait there to be killed")
    args = parser.parse_args()
    token = os.environ["HITL_AGENT_TOKEN"]  # never on the command line, where ps shows it
    pinned = json.loads(Path(args.pinned).read_text())
    args.state_dir.mkdir(parents=True, exist_ok=True)
    return run(args.base_url, token, args.request_id, pinned, args.state_dir, args.stop_after)


if __name__ == "__main__":
    raise SystemExit(main())
