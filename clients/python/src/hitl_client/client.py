"""The synchronous client (``AsyncHitlClient`` has the same methods, awaited)."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import httpx

from hitl_client import wire
from hitl_client.errors import WaitTimeout
from hitl_client.models import ApprovalRequest, Grant

T = TypeVar("T")


class HitlClient:
    """An agent's client of the HITL approval service, with a service account's token (role ``agent``).

    ``request_approval`` files (idempotent per run and call id), ``wait`` waits for the decision,
    ``claim`` takes the one execution an approval grants, ``report_outcome`` says what happened.
    ``execute`` does all of it for an HTTP request, and ``require_approval`` for a plain function."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        agent: str = "agent",
        timeout: float = 30.0,
        http: httpx.Client | None = None,
    ) -> None:
        self.agent = agent
        self._http = http or httpx.Client(timeout=timeout)
        self._base = base_url.rstrip("/")
        self._headers = {"Authorization": f"Token {token}"}

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> HitlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _post(self, path: str, body: Any = None) -> httpx.Response:
        return self._http.post(f"{self._base}{path}", json=body, headers=self._headers)

    def _get(
        self, path: str, params: Mapping[str, Any] | None = None, timeout: float | None = None
    ) -> httpx.Response:
        extra = {} if timeout is None else {"timeout": timeout}
        return self._http.get(f"{self._base}{path}", params=params, headers=self._headers, **extra)

    # --- the approval request -----------------------------------------------------------------------

    def request_approval(
        self,
        *,
        run_id: str,
        call_id: str,
        action: str,
        reason: str,
        arguments: Mapping[str, Any] | None = None,
        request: httpx.Request | None = None,
        secret_headers: Iterable[str] = wire.SECRET_HEADERS,
        on_behalf_of: str | None = None,
        context: Any = None,
        hitl_config: Mapping[str, Any] | None = None,
        callback_url: str | None = None,
    ) -> ApprovalRequest:
        """File an approval request for one call of one run; the same ids file nothing twice."""
        body = wire.filing(
            key=wire.idempotency_key(run_id, call_id),
            agent=self.agent,
            action=action,
            arguments=arguments,
            reason=reason,
            request=wire.pinned(request, secret_headers) if request is not None else None,
            on_behalf_of=on_behalf_of,
            context=context,
            hitl_config=hitl_config,
            callback_url=callback_url,
        )
        return wire.approval(self._post("/approval-requests", body))

    def get(self, request_id: str) -> ApprovalRequest:
        return wire.approval(self._get(f"/approval-requests/{request_id}"))

    def find(self, *, run_id: str, call_id: str) -> ApprovalRequest | None:
        """The request this account filed for the call ``call_id`` of the run ``run_id``, if it filed one."""
        key = wire.idempotency_key(run_id, call_id)
        return wire.found_by_key(self._get("/approval-requests", {"idempotencyKey": key}))

    def wait(self, request_id: str, *, timeout: float | None = None) -> ApprovalRequest:
        """The request once it is no longer pending (long-polls of up to a minute each). ``timeout``: the
        caller's own limit in seconds (None: wait for as long as it takes); past it ``WaitTimeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = (
                wire.WAIT_STEP
                if deadline is None
                else max(0.0, min(wire.WAIT_STEP, deadline - time.monotonic()))
            )
            found = wire.approval(
                self._get(f"/approval-requests/{request_id}", {"wait": step}, timeout=step + 30)
            )
            if not found.pending:
                return found
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"approval request {request_id} is still pending")

    def watch(self, request_id: str) -> Iterator[str]:
        """Each status of the request as the service streams it (server-sent events), until it ends."""
        url = f"{self._base}/approval-requests/{request_id}/events"
        with self._http.stream("GET", url, headers=self._headers, timeout=None) as response:
            if not response.is_success:
                response.read()
                wire.answer(response)
            for line in response.iter_lines():
                if line.startswith("data:"):
                    yield json.loads(line[5:])["status"]

    def claim(self, request_id: str, *, request: httpx.Request | None = None) -> Grant:
        """The one execution an approval grants (a pinned request: with the request about to be sent)."""
        body = {"request": wire.pinned(request, ())} if request is not None else {}
        granted = Grant.from_json(
            wire.answer(self._post(f"/approval-requests/{request_id}/claim", body))["grant"]
        )
        if granted is None:
            raise ValueError(f"the service answered the claim of {request_id} without a grant")
        return granted

    def report_outcome(
        self, request_id: str, *, status: str, http_status: int | None = None, summary: str = ""
    ) -> ApprovalRequest:
        return wire.approval(
            self._post(f"/approval-requests/{request_id}/outcome", wire.outcome(status, http_status, summary))
        )

    def cancel(self, request_id: str) -> ApprovalRequest:
        return wire.approval(self._post(f"/approval-requests/{request_id}/cancel"))

    # --- all of it in one call ------------------------------------------------------------------------

    def execute(
        self,
        request: httpx.Request,
        *,
        run_id: str,
        call_id: str,
        action: str,
        reason: str,
        arguments: Mapping[str, Any] | None = None,
        sender: httpx.Client | None = None,
        timeout: float | None = None,
        **filing: Any,
    ) -> httpx.Response:
        """Send ``request`` only once a reviewer approved it, exactly as approved, at most once.

        Files it as the pinned request, waits for the decision, claims with the request the grant
        covers (a reviewer's edit applied; secret headers as ``request`` has them), sends it with
        ``sender`` and reports the outcome. Raises ``Rejected``/``Cancelled``/``Expired`` when not
        approved, ``OutcomeUnknown``/``AlreadyClaimed`` on a retry of a run that claimed before, and
        ``RequestChanged`` if the request differs from the approved one: none of them sends anything."""
        filed = self.request_approval(
            run_id=run_id,
            call_id=call_id,
            action=action,
            reason=reason,
            arguments=arguments,
            request=request,
            **filing,
        )
        approved = wire.require_approved(filed if not filed.pending else self.wait(filed.id, timeout=timeout))
        if approved.grant is None or approved.grant.request is None:
            raise ValueError(f"approval request {approved.id} was approved without a pinned request to send")
        to_send = wire.approved_request(approved.grant.request, request)
        self.claim(approved.id, request=to_send)
        client = sender or httpx.Client(timeout=30.0)
        try:
            response = client.send(to_send)
        except httpx.HTTPError as exc:
            self.report_outcome(approved.id, status="failed", summary=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            if sender is None:
                client.close()
        self.report_outcome(
            approved.id,
            status="succeeded" if response.is_success else "failed",
            http_status=response.status_code,
        )
        return response

    def require_approval(
        self,
        *,
        reason: str,
        run_id: str | Callable[[], str],
        action: str | None = None,
        timeout: float | None = None,
        **filing: Any,
    ) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Gate a plain function: each call files its arguments (the call id is the canonical JSON of
        them), waits, claims (at most once), then runs with the arguments as approved (a reviewer's edit
        applied) and reports the outcome. Not approved: ``Rejected``/``Cancelled``/``Expired``, and the
        function does not run."""

        def decorate(function: Callable[..., T]) -> Callable[..., T]:
            name = action or function.__name__

            @functools.wraps(function)
            def gated(*args: Any, **kwargs: Any) -> T:
                arguments = wire.bound_arguments(function, args, kwargs)
                call_id = f"{name}:{wire.canonical_json(arguments)}"
                filed = self.request_approval(
                    run_id=run_id() if callable(run_id) else run_id,
                    call_id=call_id,
                    action=name,
                    reason=reason,
                    arguments=arguments,
                    **filing,
                )
                approved = wire.require_approved(
                    filed if not filed.pending else self.wait(filed.id, timeout=timeout)
                )
                grant = self.claim(approved.id)
                try:
                    result = function(**grant.arguments)
                except Exception as exc:
                    self.report_outcome(approved.id, status="failed", summary=f"{type(exc).__name__}: {exc}")
                    raise
                self.report_outcome(approved.id, status="succeeded")
                return result

            return gated

        return decorate
