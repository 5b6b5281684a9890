"""Running one declared http call with its ``preRequest`` and ``postResponse``: the one implementation behind
rule-fired calls (conversations.pipeline.httpcalls) and http tools (toolgate.sources.http).

Rules of ``run_http_call`` (the fields are read by toolgate.http_call_config):

- A call whose ``preRequest``/``postResponse`` is refused there is not sent: ``{"error": "<field>: <why>"}``
  (a document stored before the check must not run half of what it declares).
- ``preRequest.propertyInstructions`` run first, in order. Each writes its property through
  ``effects.set_property`` and into the call's own copy of the template data, so later instructions and
  the request see it. Resolving a request for pinning never runs them (it calls ``build_request`` only).
- Then ``delayBeforeExecutingInMillis``, then attempt 1. **Every attempt builds its request anew** with
  ``build_request`` from the template data as it stands then, sends it, and writes its result (with every
  secret resolved by any attempt replaced by ``<REDACTED>``) under ``memory.current.<call name>`` in that
  data and through ``effects.store_attempt``, before the next attempt is built: attempt 2 may read
  ``{memory.current.<call name>.status}``. That is why such a call cannot be pinned.
- Retries: see ``should_retry``; the wait before retry n is ``CallProcessing.wait_before_retry`` (a call
  whose waits could total more than 10 s is refused, so a call never waits longer).
- After the last attempt, ``postResponse.propertyInstructions`` run when it got an HTTP status that
  passes the instruction's ``httpCodeValidator``; they read the final result under
  ``memory.current.<call name>``.
- The result is the last attempt's: ``{"status", "body"}`` (plus ``"attempts"`` when the call declares a
  retry that can fire), ``{"error"}`` when the request could not be built or sent or failed otherwise
  (``unexpected_failure``: fail closed, name only the exception's type), a ``fireAndForget``
  call's ``{"sent": true, "status"}`` (one attempt, no postResponse). ``effects.check_attempt`` may refuse
  an attempt's request before it is sent (http tools: the self-conversation guard); its refusal is the
  result and nothing else runs.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolgate.http_call_config import (
    PropertyInstruction,
    RetryInstruction,
    read_call_processing,
)
from toolgate.http_requests import (
    BuiltRequest,
    HttpCallError,
    build_request,
    send_request,
    send_without_waiting,
    without_secrets,
)
from toolgate.templates import MISSING, lookup_path, render, value_as_text

FIRE_AND_FORGET_TIMEOUT_SECONDS = 2.0

logger = logging.getLogger(__name__)


@dataclass
class CallEffects:
    """Where a call's writes go; the caller owns memory (toolgate never imports conversations)."""

    # (name, value, scope "conversation" | "step"); required when the call declares property instructions
    set_property: Callable[[str, Any, str], None] | None = None
    # every attempt's result, secret-free, as it is written under memory.current.<call name>
    store_attempt: Callable[[dict[str, Any]], None] | None = None
    # every request about to be sent, with its attempt number (1-based)
    record_sent: Callable[[BuiltRequest, int], None] | None = None
    # a refusal result for a request that must not be sent, else None
    check_attempt: Callable[[BuiltRequest], dict[str, Any] | None] | None = None
    # called before every retry, after its wait; raises to stop the call (a cancel of the running turn)
    before_retry: Callable[[], None] | None = None


def run_http_call(
    task: dict[str, Any],
    call: dict[str, Any],
    template_data: dict[str, Any],
    *,
    caller_token: str | None,
    effects: CallEffects,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Run ``call`` of the httpcalls ``task`` (module rules) and return its result."""
    from django.conf import settings

    processing, errors = read_call_processing(call)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return {"error": f"{errors[0].field}: {errors[0].message}{more}"}
    if (processing.pre_properties or processing.post_properties) and effects.set_property is None:
        return {"error": "propertyInstructions need conversation memory, which this call cannot write"}
    timeout = float(settings.HITL_HTTP_TIMEOUT_SECONDS)
    name = str(call.get("name") or "")
    data = _working_copy(template_data)
    secrets: list[str] = []
    for instruction in processing.pre_properties or ():
        _set_property(instruction, data, effects, secrets)
    _wait(sleep, processing.delay_before_millis)
    fire_and_forget = bool(call.get("fireAndForget"))
    counted = processing.retry is not None and processing.retry.max_retries >= 1 and not fire_and_forget
    attempt = 0
    while True:
        attempt += 1
        result, refused = _attempt(
            task,
            call,
            data,
            caller_token=caller_token,
            effects=effects,
            number=attempt,
            fire_and_forget=fire_and_forget,
            timeout=timeout,
            secrets=secrets,
        )
        if refused:
            return result
        result = without_secrets({**result, "attempts": attempt} if counted else result, secrets)
        data["memory"]["current"][name] = result
        if effects.store_attempt is not None:
            effects.store_attempt(result)
        if fire_and_forget or not should_retry(
            processing.retry, retries_so_far=attempt - 1, result=result, data=data
        ):
            break
        _wait(sleep, processing.wait_before_retry(attempt))
        if effects.before_retry is not None:
            effects.before_retry()
    status = result.get("status")
    if isinstance(status, int) and not isinstance(status, bool):
        for instruction in processing.post_properties:
            if status in instruction.run_on_http_codes and status not in instruction.skip_on_http_codes:
                _set_property(instruction, data, effects, secrets)
    return result


def should_retry(
    retry: RetryInstruction | None, *, retries_so_far: int, result: dict[str, Any], data: dict[str, Any]
) -> bool:
    """Send the request again when the call declares a retry with ``maxRetries`` ≥ 1 and fewer than
    ``maxRetries`` retries were made, the attempt got an HTTP status (a request that could not be built
    or sent is not retried, as in EDDI), and either the status is one of ``retryOnHttpCodes``
    or — when the body is not empty — a ``responseValuePathMatchers`` entry's answer differs from its
    ``trueIfNoMatch`` (by default: the matcher matches, so a 200 whose body says "pending" is retried).
    """
    if retry is None or retry.max_retries < 1 or retries_so_far >= retry.max_retries:
        return False
    status = result.get("status")
    if not isinstance(status, int) or isinstance(status, bool):
        return False
    if status in retry.retry_on_http_codes:
        return True
    if result.get("body") in (None, ""):
        return False
    return any(
        value_path_matches(matcher.value_path, matcher.equals, matcher.contains, data)
        != matcher.true_if_no_match
        for matcher in retry.matchers
    )


def value_path_matches(
    path: tuple[str, ...], equals: str | None, contains: str | None, data: dict[str, Any]
) -> bool:
    """EDDI's value-path match: the value at ``path`` (missing or null: no match) matches when its
    text equals ``equals``, or when it is a string containing ``contains`` or a list holding it; with
    neither given, a boolean is its own answer and any other value matches by being there."""
    value = lookup_path(data, list(path))
    if value is MISSING or value is None:
        return False
    if equals is not None and equals == value_as_text(value):
        return True
    if contains is not None:
        return (isinstance(value, str) and contains in value) or (
            isinstance(value, list) and contains in value
        )
    if equals is None:
        return value if isinstance(value, bool) else True
    return False


def property_value(instruction: PropertyInstruction, data: dict[str, Any]) -> Any:
    """``valueString`` rendered as a template, or the value at ``fromObjectPath`` as it is (``""`` when the
    path leads nowhere, as in EDDI; never rendered again, so a response cannot inject
    placeholders); with ``convertToObject`` a text that is a JSON object becomes that object."""
    if instruction.from_object_path is not None:
        found = lookup_path(data, list(instruction.from_object_path))
        value = "" if found is MISSING else copy.deepcopy(found)
    else:
        value = render(instruction.value_string or "", data)
    if instruction.convert_to_object and isinstance(value, str):
        text = value.strip()
        if text.startswith("{") and text.endswith("}"):
            try:
                parsed = json.loads(text)
            except ValueError:
                return value
            if isinstance(parsed, dict):
                return parsed
    return value


def _set_property(
    instruction: PropertyInstruction, data: dict[str, Any], effects: CallEffects, secrets: list[str]
) -> None:
    value = without_secrets(property_value(instruction, data), secrets)
    if instruction.scope == "step":
        current = data["memory"]["current"]
        step_properties = current.get("properties")
        current["properties"] = {
            **(step_properties if isinstance(step_properties, dict) else {}),
            instruction.name: value,
        }
    else:
        data["properties"] = {**data["properties"], instruction.name: value}
    if effects.set_property is not None:  # run_http_call refuses property instructions without it
        effects.set_property(instruction.name, value, instruction.scope)


def _attempt(
    task: dict[str, Any],
    call: dict[str, Any],
    data: dict[str, Any],
    *,
    caller_token: str | None,
    effects: CallEffects,
    number: int,
    fire_and_forget: bool,
    timeout: float,
    secrets: list[str],
) -> tuple[dict[str, Any], bool]:
    """(result, refused): one request built from ``data`` and sent; its resolved secrets join ``secrets``."""
    try:
        built = build_request(task, call, data, caller_token=caller_token)
    except HttpCallError as error:  # its message names no value (http_requests rules)
        return {"error": str(error)}, False
    secrets.extend(value for value in built.secrets_used if value not in secrets)
    try:
        refusal = effects.check_attempt(built) if effects.check_attempt is not None else None
        if refusal is not None:
            return refusal, True
        if effects.record_sent is not None:
            effects.record_sent(built, number)
        if fire_and_forget:
            status = send_without_waiting(built, timeout=min(timeout, FIRE_AND_FORGET_TIMEOUT_SECONDS))
            return {"sent": True, "status": status}, False
        response = send_request(built, timeout=timeout)
    except HttpCallError as error:
        return {"error": str(error)}, False
    except Exception as error:
        return {"error": unexpected_failure(str(call.get("name") or ""), error)}, False
    return {"status": response.status, "body": response.body}, False


def unexpected_failure(call_name: str, error: Exception) -> str:
    """The error result of an attempt that failed in a way http_requests does not name (a response too
    deeply nested to parse, say). Fail closed and report, never raise: a rule-fired call must not fail
    the turn, and a tool's result must go through the same secret filter as every other result. Only
    the exception's type is named: its text may quote the request, and a resolved ``${env:…}`` or
    ``${caller:token}`` value is not among the secrets that filter replaces."""
    logger.warning("http call %s failed: %s", call_name, type(error).__name__)
    return f"the call failed: {type(error).__name__}"


def _working_copy(template_data: dict[str, Any]) -> dict[str, Any]:
    """A copy whose ``properties`` and ``memory.current`` this call may write without touching the caller's."""
    data = dict(template_data)
    memory = dict(data.get("memory") or {})
    memory["current"] = dict(memory.get("current") or {})
    data["memory"] = memory
    data["properties"] = dict(data.get("properties") or {})
    return data


def _wait(sleep: Callable[[float], None], millis: int) -> None:
    if millis > 0:
        sleep(millis / 1000)
