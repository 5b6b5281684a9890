"""What a declared http call does around its request (``preRequest``, ``postResponse``), read and checked once.

The subset of EDDI's ApiCall that runs here; a field outside it is refused (at save, and again
before a stored call runs), never ignored:

- ``preRequest.propertyInstructions``: property instructions run, in order, before the request is built.
- ``preRequest.delayBeforeExecutingInMillis`` (0..10000): a wait before the first attempt (and before a
  retry whose backoff is 0).
- ``postResponse.propertyInstructions``: property instructions run after the last attempt, each only when
  that attempt's HTTP status passes its ``httpCodeValidator``.
- ``postResponse.retryApiCallInstruction``: ``maxRetries`` (0..10, default 3), ``exponentialBackoffDelayInMillis``
  (0..10000, default 1000), ``maxBackoffDelayInMillis`` (0..10000; 0 or absent: 10000), ``retryOnHttpCodes``
  (integers 100..599, default ``[502, 503]``), ``responseValuePathMatchers`` (``[{valuePath, equals?,
  contains?, trueIfNoMatch?}]``). All the waits of one call, its retries all used, may total at most
  10 s (``_check_total_wait``).
- A property instruction: ``name`` (a literal name), exactly one of ``valueString`` (a template) and
  ``fromObjectPath`` (a path into the template data such as ``memory.current.createJob.body.id``),
  ``scope`` (``conversation``, the default, or ``step``), ``convertToObject`` (boolean) and, in
  ``postResponse`` only, ``httpCodeValidator`` ``{runOnHttpCode, skipOnHttpCode}`` (defaults ``[200, 201]``
  and ``[0, 400, 401, 402, 403, 404, 409, 410, 500, 501, 502]``, as in EDDI).

Refused with a reason: ``preRequest.batchRequests``, ``postResponse.outputBuildInstructions`` and
``qrBuildInstructions``, the property fields EDDI declares but never applies (``toObjectPath``,
``override``, ``runOnValidationError``, ``value*``, ``visibility``), secret references in a property
instruction (a secret must never be written to memory), and ``postResponse`` on a ``fireAndForget``
call (its response is never read).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from common.edit_distance import near_miss
from common.field_errors import FieldError, child, json_type
from toolgate.outbound.templates import TEMPLATE_ROOTS

MAX_RETRIES = 10
MAX_DELAY_MILLIS = 10_000
MAX_TOTAL_WAIT_MILLIS = 10_000
DEFAULT_MAX_RETRIES = 3
DEFAULT_BACKOFF_MILLIS = 1000
DEFAULT_RETRY_ON_HTTP_CODES = (502, 503)
DEFAULT_RUN_ON_HTTP_CODES = (200, 201)
DEFAULT_SKIP_ON_HTTP_CODES = (0, 400, 401, 402, 403, 404, 409, 410, 500, 501, 502)
PROPERTY_SCOPES = ("conversation", "step")

PRE_REQUEST_KEYS = ("propertyInstructions", "delayBeforeExecutingInMillis")
POST_RESPONSE_KEYS = ("propertyInstructions", "retryApiCallInstruction")
RETRY_KEYS = (
    "maxRetries",
    "exponentialBackoffDelayInMillis",
    "maxBackoffDelayInMillis",
    "retryOnHttpCodes",
    "responseValuePathMatchers",
)
MATCHER_KEYS = ("valuePath", "equals", "contains", "trueIfNoMatch")
PRE_PROPERTY_KEYS = ("name", "valueString", "fromObjectPath", "scope", "convertToObject")
POST_PROPERTY_KEYS = (*PRE_PROPERTY_KEYS, "httpCodeValidator")
HTTP_CODE_VALIDATOR_KEYS = ("runOnHttpCode", "skipOnHttpCode")

_UNSUPPORTED = {
    "batchRequests": "is not supported: a batch would send requests that were never declared one by one",
    "outputBuildInstructions": "is not supported: render the response with an output task "
    "({memory.current.<call name>.body…})",
    "qrBuildInstructions": "is not supported: declare quick replies in an output task",
    "retryHttpCallInstruction": "is the old name of 'retryApiCallInstruction': rename it",
    "toObjectPath": "is not supported (EDDI declares it but never applies it)",
    "override": "is not supported: an instruction always overwrites the property",
    "runOnValidationError": "is not supported: responses are not validated, so it could never apply",
    "visibility": "is not supported: properties set by a call belong to the conversation",
    **{
        key: "is not supported: use 'valueString' (a template) or 'fromObjectPath'"
        for key in ("valueObject", "valueList", "valueInt", "valueFloat", "valueBoolean")
    },
}
_NAME = re.compile(r"[A-Za-z0-9_-]+")
_PATH = re.compile(r"[\w-]+(?:\[\d+\])*(?:\.[\w-]+(?:\[\d+\])*)*")
_SECRET_REFERENCE = re.compile(r"\$\{(?:vault|env|caller):")


@dataclass(frozen=True)
class PropertyInstruction:
    name: str
    scope: str = "conversation"
    value_string: str | None = None
    from_object_path: tuple[str, ...] | None = None
    convert_to_object: bool = False
    run_on_http_codes: tuple[int, ...] = DEFAULT_RUN_ON_HTTP_CODES
    skip_on_http_codes: tuple[int, ...] = DEFAULT_SKIP_ON_HTTP_CODES


@dataclass(frozen=True)
class ValuePathMatcher:
    value_path: tuple[str, ...]
    equals: str | None = None
    contains: str | None = None
    true_if_no_match: bool = False


@dataclass(frozen=True)
class RetryInstruction:
    max_retries: int = DEFAULT_MAX_RETRIES
    backoff_millis: int = DEFAULT_BACKOFF_MILLIS
    max_backoff_millis: int = MAX_DELAY_MILLIS
    retry_on_http_codes: tuple[int, ...] = DEFAULT_RETRY_ON_HTTP_CODES
    matchers: tuple[ValuePathMatcher, ...] = ()


@dataclass(frozen=True)
class CallProcessing:
    """What runs around the request; ``pre_properties`` is None when ``preRequest.propertyInstructions`` is absent."""

    pre_properties: tuple[PropertyInstruction, ...] | None = None
    delay_before_millis: int = 0
    post_properties: tuple[PropertyInstruction, ...] = ()
    retry: RetryInstruction | None = None

    def wait_before_retry(self, retry_number: int) -> int:
        """Milliseconds before retry ``retry_number`` (1-based): ``exponentialBackoffDelayInMillis`` × 2^(n−1),
        at most ``maxBackoffDelayInMillis``; a backoff of 0 waits ``delayBeforeExecutingInMillis`` instead."""
        retry = self.retry or RetryInstruction()
        delay = min(retry.backoff_millis * 2 ** min(retry_number - 1, 20), retry.max_backoff_millis)
        return delay if delay > 0 else self.delay_before_millis

    def planned_wait_millis(self) -> int:
        """Every wait of the call when it uses all its retries (the first delay included)."""
        retries = self.retry.max_retries if self.retry is not None else 0
        return self.delay_before_millis + sum(self.wait_before_retry(n) for n in range(1, retries + 1))


@dataclass
class _Reader:
    errors: list[FieldError] = field(default_factory=list)

    def error(self, path: str, message: str) -> None:
        self.errors.append(FieldError(path, message))

    def object(self, value: object, path: str, *, required: bool = False) -> dict | None:
        if value is None:
            if required:
                self.error(path, "must be an object, got null")
            return None
        if not isinstance(value, dict):
            self.error(path, f"must be an object, got {json_type(value)}")
            return None
        return value

    def keys(self, obj: dict, path: str, known: tuple[str, ...], what: str) -> None:
        for key in obj:
            if key in known:
                continue
            if key in _UNSUPPORTED:
                self.error(child(path, key), f"'{key}' {_UNSUPPORTED[key]}")
                continue
            close = near_miss(str(key), known)
            hint = f" (did you mean '{close}'?)" if close else f" (allowed: {', '.join(known)})"
            self.error(child(path, key), f"'{key}' is not a {what} field{hint}")

    def integer(self, value: object, path: str, low: int, high: int, default: int) -> int:
        if value is None:
            return default
        if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
            return value
        self.error(path, f"must be an integer from {low} to {high}, got {_shown(value)}")
        return default

    def boolean(self, value: object, path: str) -> bool:
        if value is None:
            return False
        if not isinstance(value, bool):
            self.error(path, f"must be true or false, got {json_type(value)}")
            return False
        return value

    def string(self, value: object, path: str, *, required: bool = False) -> str | None:
        if value is None:
            if required:
                self.error(path, "is required")
            return None
        if not isinstance(value, str):
            self.error(path, f"must be a string, got {json_type(value)}")
            return None
        return value

    def status_codes(self, value: object, path: str, low: int, default: tuple[int, ...]) -> tuple[int, ...]:
        if value is None:
            return default
        if not isinstance(value, list):
            self.error(path, f"must be an array of HTTP status codes, got {json_type(value)}")
            return default
        codes = []
        for index, code in enumerate(value):
            if isinstance(code, int) and not isinstance(code, bool) and low <= code <= 599:
                codes.append(code)
            else:
                self.error(child(path, index), f"must be an integer from {low} to 599, got {_shown(code)}")
        return tuple(codes)

    def path(self, value: object, path: str) -> tuple[str, ...] | None:
        text = self.string(value, path)
        if text is None:
            return None
        if not _PATH.fullmatch(text):
            self.error(path, f"'{text}' is not a path such as memory.current.<call name>.body.items[0].id")
            return None
        keys = tuple(re.sub(r"\[(\d+)\]", r".\1", text).split("."))
        if keys[0] not in TEMPLATE_ROOTS:
            self.error(path, f"'{text}' must start with one of {', '.join(TEMPLATE_ROOTS)}")
            return None
        return keys


def read_call_processing(call: dict[str, Any], path: str = "") -> tuple[CallProcessing, list[FieldError]]:
    """The ``preRequest``/``postResponse`` of ``call`` and every error in them, under ``path`` (the call's)."""
    reader = _Reader()
    pre = reader.object(call.get("preRequest"), child(path, "preRequest"))
    post = reader.object(call.get("postResponse"), child(path, "postResponse"))
    processing = CallProcessing()
    if pre is not None:
        pre_path = child(path, "preRequest")
        reader.keys(pre, pre_path, PRE_REQUEST_KEYS, "preRequest")
        processing = CallProcessing(
            pre_properties=_property_instructions(
                reader,
                pre.get("propertyInstructions"),
                child(pre_path, "propertyInstructions"),
                post_response=False,
            ),
            delay_before_millis=reader.integer(
                pre.get("delayBeforeExecutingInMillis"),
                child(pre_path, "delayBeforeExecutingInMillis"),
                0,
                MAX_DELAY_MILLIS,
                0,
            ),
        )
    if post is not None:
        post_path = child(path, "postResponse")
        if call.get("fireAndForget") is True:
            reader.error(post_path, "has no effect on a fireAndForget call: its response is never read")
        reader.keys(post, post_path, POST_RESPONSE_KEYS, "postResponse")
        processing = CallProcessing(
            pre_properties=processing.pre_properties,
            delay_before_millis=processing.delay_before_millis,
            post_properties=_property_instructions(
                reader,
                post.get("propertyInstructions"),
                child(post_path, "propertyInstructions"),
                post_response=True,
            )
            or (),
            retry=_retry(
                reader, post.get("retryApiCallInstruction"), child(post_path, "retryApiCallInstruction")
            ),
        )
    _check_total_wait(reader, processing, path)
    return processing, reader.errors


def _check_total_wait(reader: _Reader, processing: CallProcessing, path: str) -> None:
    """A call waits (on the conversation's turn) at most MAX_TOTAL_WAIT_MILLIS in all, so a retry that could
    only be made after a longer wait is refused rather than dropped."""
    planned = processing.planned_wait_millis()
    if planned <= MAX_TOTAL_WAIT_MILLIS or processing.retry is None:
        return
    waited, affordable = processing.delay_before_millis, 0
    for retry_number in range(1, processing.retry.max_retries + 1):
        waited += processing.wait_before_retry(retry_number)
        if waited > MAX_TOTAL_WAIT_MILLIS:
            break
        affordable = retry_number
    reader.error(
        child(child(path, "postResponse"), "retryApiCallInstruction"),
        f"would wait {planned} ms in all to make its {processing.retry.max_retries} retries, but the waits "
        f"of one call may total at most {MAX_TOTAL_WAIT_MILLIS} ms (delayBeforeExecutingInMillis "
        f"included): with these delays at most {affordable} retries fit; lower maxRetries, "
        "exponentialBackoffDelayInMillis or maxBackoffDelayInMillis",
    )


def _property_instructions(
    reader: _Reader, value: object, path: str, *, post_response: bool
) -> tuple[PropertyInstruction, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        reader.error(path, f"must be an array, got {json_type(value)}")
        return ()
    instructions = []
    for index, item in enumerate(value):
        instruction = _property_instruction(reader, item, child(path, index), post_response=post_response)
        if instruction is not None:
            instructions.append(instruction)
    return tuple(instructions)


def _property_instruction(
    reader: _Reader, value: object, path: str, *, post_response: bool
) -> PropertyInstruction | None:
    entry = reader.object(value, path, required=True)
    if entry is None:
        return None
    if "httpCodeValidator" in entry and not post_response:
        reader.error(
            child(path, "httpCodeValidator"),
            "is only meaningful in postResponse: a preRequest instruction runs before any response",
        )
        entry = {key: item for key, item in entry.items() if key != "httpCodeValidator"}
    reader.keys(
        entry, path, POST_PROPERTY_KEYS if post_response else PRE_PROPERTY_KEYS, "property instruction"
    )
    name = reader.string(entry.get("name"), child(path, "name"), required=True)
    if name is not None and not _NAME.fullmatch(name):
        reader.error(
            child(path, "name"), f"'{name}' may only contain A-Z a-z 0-9 _ - (a name is not a template)"
        )
    scope = "conversation" if entry.get("scope") is None else entry["scope"]
    if scope not in PROPERTY_SCOPES:
        reader.error(child(path, "scope"), f"{_shown(scope)} must be one of {', '.join(PROPERTY_SCOPES)}")
    value_string = reader.string(entry.get("valueString"), child(path, "valueString"))
    if value_string is not None and _SECRET_REFERENCE.search(value_string):
        reader.error(
            child(path, "valueString"),
            "may not hold a secret reference: a secret is never written to conversation memory",
        )
    from_path = reader.path(entry.get("fromObjectPath"), child(path, "fromObjectPath"))
    given = [key for key in ("valueString", "fromObjectPath") if entry.get(key) is not None]
    if len(given) != 1:
        reader.error(
            path,
            "needs exactly one of 'valueString' (a template) and 'fromObjectPath' (a path)"
            + (", not both" if given else ""),
        )
    convert = reader.boolean(entry.get("convertToObject"), child(path, "convertToObject"))
    run_on, skip_on = _http_code_validator(
        reader, entry.get("httpCodeValidator"), child(path, "httpCodeValidator")
    )
    if name is None or scope not in PROPERTY_SCOPES:
        return None
    return PropertyInstruction(
        name=name,
        scope=str(scope),
        value_string=value_string,
        from_object_path=from_path,
        convert_to_object=convert,
        run_on_http_codes=run_on,
        skip_on_http_codes=skip_on,
    )


def _http_code_validator(
    reader: _Reader, value: object, path: str
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    validator = reader.object(value, path)
    if validator is None:
        return DEFAULT_RUN_ON_HTTP_CODES, DEFAULT_SKIP_ON_HTTP_CODES
    reader.keys(validator, path, HTTP_CODE_VALIDATOR_KEYS, "httpCodeValidator")
    return (
        reader.status_codes(
            validator.get("runOnHttpCode"), child(path, "runOnHttpCode"), 100, DEFAULT_RUN_ON_HTTP_CODES
        ),
        reader.status_codes(
            validator.get("skipOnHttpCode"), child(path, "skipOnHttpCode"), 0, DEFAULT_SKIP_ON_HTTP_CODES
        ),
    )


def _retry(reader: _Reader, value: object, path: str) -> RetryInstruction | None:
    retry = reader.object(value, path)
    if retry is None:
        return None
    reader.keys(retry, path, RETRY_KEYS, "retryApiCallInstruction")
    max_backoff = reader.integer(
        retry.get("maxBackoffDelayInMillis"), child(path, "maxBackoffDelayInMillis"), 0, MAX_DELAY_MILLIS, 0
    )
    matchers_path = child(path, "responseValuePathMatchers")
    matchers = retry.get("responseValuePathMatchers")
    parsed: list[ValuePathMatcher] = []
    if matchers is not None and not isinstance(matchers, list):
        reader.error(matchers_path, f"must be an array, got {json_type(matchers)}")
    for index, item in enumerate(matchers if isinstance(matchers, list) else []):
        matcher = _matcher(reader, item, child(matchers_path, index))
        if matcher is not None:
            parsed.append(matcher)
    return RetryInstruction(
        max_retries=reader.integer(
            retry.get("maxRetries"), child(path, "maxRetries"), 0, MAX_RETRIES, DEFAULT_MAX_RETRIES
        ),
        backoff_millis=reader.integer(
            retry.get("exponentialBackoffDelayInMillis"),
            child(path, "exponentialBackoffDelayInMillis"),
            0,
            MAX_DELAY_MILLIS,
            DEFAULT_BACKOFF_MILLIS,
        ),
        max_backoff_millis=max_backoff or MAX_DELAY_MILLIS,
        retry_on_http_codes=reader.status_codes(
            retry.get("retryOnHttpCodes"), child(path, "retryOnHttpCodes"), 100, DEFAULT_RETRY_ON_HTTP_CODES
        ),
        matchers=tuple(parsed),
    )


def _matcher(reader: _Reader, value: object, path: str) -> ValuePathMatcher | None:
    entry = reader.object(value, path, required=True)
    if entry is None:
        return None
    reader.keys(entry, path, MATCHER_KEYS, "responseValuePathMatchers")
    if entry.get("valuePath") is None:
        reader.error(child(path, "valuePath"), "is required")
    value_path = reader.path(entry.get("valuePath"), child(path, "valuePath"))
    equals = reader.string(entry.get("equals"), child(path, "equals"))
    contains = reader.string(entry.get("contains"), child(path, "contains"))
    true_if_no_match = reader.boolean(entry.get("trueIfNoMatch"), child(path, "trueIfNoMatch"))
    if value_path is None:
        return None
    return ValuePathMatcher(
        value_path=value_path,
        equals=equals or None,
        contains=contains or None,
        true_if_no_match=true_if_no_match,
    )


def _shown(value: object) -> str:
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value)
    return json_type(value)
