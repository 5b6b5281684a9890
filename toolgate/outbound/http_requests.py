"""Declared HTTP calls: building the request (one place for rules, LLM tools and pinning) and sending it.

Building rules:

- ``method``, ``path``, header values, query parameter values and body strings are templates
  (``{args.X}``, ``{properties.X}``, ``{memory.current.X}``, ``{context.X}``).
- The path template may carry a query (``/deploy/{args.ref}?version=3``), and so may ``targetServerUrl``:
  their pairs come first, then ``queryParams``, in order (repeated names stay repeated). Values substituted
  into the path are percent-encoded so they cannot add segments or a query; values substituted into the
  template's query part are encoded so they cannot add a pair (``&``, ``=``, ``#``). Values substituted
  into ``targetServerUrl`` keep unreserved characters only (everything else percent-encoded), so they
  never change the scheme, host or port the document wrote. A fragment is dropped: it is never sent.
- **No dot segments.** A path holding ``.`` or ``..`` as a segment, as written or decoded
  (``..%2F``), is refused (``refuse_dot_segments``): the target would resolve another path than the
  one judged by the gate and shown to the reviewer.
- **One request object.** ``BuiltRequest.url`` never holds a query: every pair lives in ``query``.
  ``BuiltRequest.outgoing()`` makes the one ``httpx.Request`` that is sent, and the preview, the
  fingerprint, the record of what was sent and the self-conversation guard read the target from that same
  object (``target``, ``view``), so what is approved and what runs cannot diverge.
- A dict/list body is rendered value by value (strings inside rendered, keys kept) and sent as JSON;
  a string body is sent as text (as JSON when it parses as a JSON object or array).
- Secret references ``${env:NAME}``, ``${vault:NAME}`` and ``${caller:token}`` are resolved in the
  document's own text, never in substituted values: a value such as ``{args.x}`` cannot smuggle in
  ``${env:…}``. ``${caller:token}`` is allowed in headers only. Each resolved value is an injected value
  (``BuiltRequest.injected``), and a request with any carries its view (``BuiltRequest.shown``, built by
  the same code with stand-ins, ``toolgate.outbound.request_views``): what the reviewer sees and what the
  fingerprint covers, every injected value named by its reference.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import httpx

from toolgate.outbound.egress import EgressRefused, checked_transport
from toolgate.outbound.http_errors import HttpCallError as HttpCallError
from toolgate.outbound.http_errors import SecretReferenceError as SecretReferenceError
from toolgate.outbound.redaction import REDACTED as REDACTED
from toolgate.outbound.redaction import SENSITIVE_NAME_PARTS as SENSITIVE_NAME_PARTS
from toolgate.outbound.redaction import is_sensitive_name as is_sensitive_name
from toolgate.outbound.redaction import redact_headers, redact_query_pairs, replace_known_secrets
from toolgate.outbound.request_views import RequestView, request_view
from toolgate.outbound.secret_references import (
    SECRET_REFERENCE as SECRET_REFERENCE,
)
from toolgate.outbound.secret_references import (
    InjectedValue,
    ReferenceResolver,
    ReferenceSentinels,
    ReferenceValues,
)
from toolgate.outbound.secret_references import (
    resolve_secret_references as resolve_secret_references,
)
from toolgate.outbound.templates import render


class PrivateAddressError(HttpCallError):
    """The target resolves to a non-public address while those are denied (toolgate.outbound.egress): not sent."""


@dataclass
class BuiltRequest:
    method: str
    url: str
    query: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    content_type: str | None = None
    # The values resolved from secret references while building, in order (toolgate.outbound.secret_references).
    injected: list[InjectedValue] = field(default_factory=list, compare=False, repr=False)
    # The same request with each injected value shown as its reference (None: nothing was injected).
    shown: RequestView | None = field(default=None, compare=False, repr=False)
    # The path of targetServerUrl: patterns also see the request's path relative to it.
    base_path: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        # The invariant behind "what runs is what was approved": a query in the URL would be dropped by
        # httpx (it replaces a URL's query when params are given), so it is moved into ``query`` here.
        url, fragment_free_query = _split_query(self.url.split("#", 1)[0])
        if fragment_free_query is not None:
            self.url = url
            self.query = _parse_query(fragment_free_query) + list(self.query)
        else:
            self.url = url

    def outgoing(self, *, timeout: float | None = None) -> httpx.Request:
        """The one request that is sent (and that previews and fingerprints are derived from)."""
        try:
            url = httpx.URL(self.url)
            if self.query:
                url = url.copy_with(query=encode_query(self.query).encode("ascii"))
            extensions = {"timeout": httpx.Timeout(timeout).as_dict()} if timeout is not None else None
            return httpx.Request(
                self.method, url, headers=self.headers_to_send(), content=self.body, extensions=extensions
            )
        except (httpx.InvalidURL, UnicodeError, ValueError, TypeError) as error:
            raise HttpCallError(f"the request cannot be built: {type(error).__name__}") from None

    def target(self) -> tuple[str, list[tuple[str, str]]]:
        """(URI without query, decoded query pairs) of exactly what ``outgoing()`` sends."""
        url = self.outgoing().url
        return str(url.copy_with(query=None, fragment=None)), _parse_query(url.query.decode("ascii"))

    def sent_path(self) -> str:
        """The path ``outgoing()`` sends (encoded as on the wire, dot segments resolved, no query)."""
        return self.outgoing().url.copy_with(query=None, fragment=None).raw_path.decode("ascii")

    @property
    def secrets_used(self) -> list[str]:
        """Every injected value (vault, env, the caller's token): replaced by <REDACTED> wherever a
        result or record of this request is shown or stored."""
        return [item.value for item in self.injected if item.value]

    def view(self) -> RequestView:
        """This request as a reviewer is shown it (toolgate.outbound.request_views)."""
        if self.shown is not None:
            return self.shown
        return _view_of(self, lambda text: text)

    def headers_to_send(self) -> dict[str, str]:
        """The headers plus ``Content-Type`` from ``content_type`` unless a header already sets it."""
        headers = dict(self.headers)
        if self.content_type and not any(name.lower() == "content-type" for name in headers):
            headers["Content-Type"] = self.content_type
        return headers


@dataclass
class HttpResult:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


_PATH_SAFE = "-._~!$&'()*+,;=:@"
# A query name or value: everything but the pair separators, "+" (a space in form decoding) and "#".
_QUERY_SAFE = "-._~!$'()*,;:@/?"
# A value substituted into targetServerUrl: unreserved characters only, so it never adds a delimiter
# (":", "/", "?", "#", "@", "%") and cannot change the scheme, host or port the document wrote.
_SERVER_URL_SAFE = "-._~"


def build_request(
    task: dict[str, Any], call: dict[str, Any], template_data: dict[str, Any], *, caller_token: str | None
) -> BuiltRequest:
    """The request ``call`` of the ``httpcalls`` ``task`` sends with ``template_data`` (see module rules),
    with its view (``shown``) built from the same template data by the same code."""
    values = ReferenceValues(caller_token)
    built = _assemble(task, call, template_data, values)
    built.injected = values.injected
    if built.injected:
        sentinels = ReferenceSentinels()
        built.shown = _view_of(_assemble(task, call, template_data, sentinels), sentinels.named)
    return built


def _assemble(
    task: dict[str, Any], call: dict[str, Any], template_data: dict[str, Any], resolver: ReferenceResolver
) -> BuiltRequest:
    request = call.get("request") or {}

    def fill(text: Any, *, allow_caller: bool = False, escape: Any = None, in_url: bool = False) -> str:
        return _render_template(
            str(text),
            template_data,
            resolver=_placed_in_url(resolver) if in_url else resolver,
            allow_caller=allow_caller,
            escape=escape,
        )

    method = fill(request.get("method") or "GET").strip().upper()
    server_url = fill(
        task.get("targetServerUrl") or "",
        escape=lambda value: quote(value, safe=_SERVER_URL_SAFE),
        in_url=True,
    )
    base, base_query = _split_query(server_url.split("#", 1)[0])
    path_template, query_template = _split_query(str(request.get("path") or ""))
    path = fill(path_template, escape=lambda value: quote(value, safe=_PATH_SAFE), in_url=True)
    url = _join_url(base, path)
    refuse_dot_segments(url)
    query = _parse_query(base_query or "")
    if query_template is not None:
        # a query value, secret or not, is encoded so it stays one value (decoded once by _parse_query)
        rendered = _render_template(
            query_template,
            template_data,
            resolver=lambda match, allow: quote(resolver(match, allow), safe=_QUERY_SAFE),
            allow_caller=False,
            escape=lambda value: quote(value, safe=_QUERY_SAFE),
        )
        query += _parse_query(rendered.split("#", 1)[0])
    headers = {
        str(name): fill(value, allow_caller=True) for name, value in (request.get("headers") or {}).items()
    }
    query += [(name, fill(value)) for name, value in _query_pairs(request.get("queryParams"))]
    body, content_type = _build_body(request.get("body"), fill)
    explicit_type = next((v for k, v in headers.items() if k.lower() == "content-type"), None)
    return BuiltRequest(
        method, url, query, headers, body, explicit_type or content_type, base_path=_path_of(base)
    )


def _placed_in_url(resolver: ReferenceResolver) -> ReferenceResolver:
    """A secret written into the URL itself (``targetServerUrl``, the path) is placed as written, so it may
    carry structure (``${env:PAYMENTS_URL}``, a webhook path); one holding ``?`` or ``#`` would be cut
    there — part of it sent as a query or dropped as a fragment — so it is refused, naming the reference.
    A secret that is a query value belongs in ``queryParams``, where any character is encoded."""

    def resolve(match: Any, allow_caller: bool) -> str:
        value = resolver(match, allow_caller)
        if "?" in value or "#" in value:
            raise SecretReferenceError(
                f"{match.group(0)} holds '?' or '#' and cannot be written into the URL; use queryParams, "
                "a header or the body"
            )
        return value

    return resolve


def _view_of(built: BuiltRequest, named: Any) -> RequestView:
    """The view of ``built`` from the ``httpx.Request`` it sends; from its parts when httpx cannot make one
    (a stand-in where httpx needs a host or a port)."""
    try:
        url = built.outgoing().url
        whole, uri = str(url), str(url.copy_with(query=None, fragment=None))
        query = _parse_query(url.query.decode("ascii"))
    except HttpCallError:
        whole = built.url + ("?" + encode_query(built.query) if built.query else "")
        uri, query = built.url, list(built.query)
    return request_view(
        built.method,
        url=whole,
        uri=uri,
        query=query,
        headers=built.headers_to_send(),
        body=built.body,
        named=named,
    )


def refuse_dot_segments(url: str) -> None:
    """Refuse a request whose path holds a ``.`` or ``..`` segment, as written or once decoded (up to three
    times): a target would resolve another path than the one the gate judged and the reviewer saw
    (``/v1/users/..%2F..%2Fadmin`` is ``/v1/admin`` to a server that decodes before it normalises).
    ``\\`` counts as a separator and ``;…`` path parameters are ignored, as some servers do."""
    try:
        path = urlsplit(url).path
    except ValueError:
        return  # httpx refuses it when the request is made
    for _ in range(4):
        for segment in path.replace("\\", "/").split("/"):
            if segment.split(";", 1)[0] in (".", ".."):
                raise HttpCallError(
                    "the request path holds a '.' or '..' segment (from the template or a substituted "
                    "value); it is refused so the target cannot resolve another path"
                )
        decoded = unquote(path)
        if decoded == path:
            return
        path = decoded


def _path_of(base: str) -> str:
    try:
        return urlsplit(base).path.rstrip("/")
    except ValueError:
        return ""


def send_request(built: BuiltRequest, *, timeout: float) -> HttpResult:
    """Send ``built`` and return status and body (parsed JSON, else text); HttpCallError on failure.

    While ``settings.HITL_HTTP_DENY_PRIVATE`` is true the connection is made by toolgate.outbound.egress (its rules:
    resolved once, every address checked, the socket opened to a checked one) and a refused host is a
    PrivateAddressError. Redirects are not followed.
    """
    with outbound_client(timeout) as client:
        try:
            response = client.send(built.outgoing(timeout=timeout))
        except EgressRefused as refused:
            raise PrivateAddressError(str(refused)) from None
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise not_sent(error) from error
    return HttpResult(status=response.status_code, body=_parse_body(response), headers=dict(response.headers))


def send_without_waiting(built: BuiltRequest, *, timeout: float) -> int | None:
    """Send ``built`` and return the status if it arrives within ``timeout``; the body is never read.

    A read timeout after the request went out is not an error (None is returned); failing to connect, or a
    host toolgate.outbound.egress refuses, is.
    """
    with outbound_client(timeout) as client:
        try:
            response = client.send(built.outgoing(timeout=timeout), stream=True)
        except EgressRefused as refused:
            raise PrivateAddressError(str(refused)) from None
        except httpx.ReadTimeout:
            return None
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise not_sent(error) from error
        response.close()
        return response.status_code


def not_sent(error: httpx.HTTPError | httpx.InvalidURL) -> HttpCallError:
    """The error of a request httpx could not send, safe to store and show. A LocalProtocolError or an
    InvalidURL quotes what it refused (a header value, the URL), which may hold a resolved secret, so
    only its type is named; the others describe the connection or the server's answer."""
    if isinstance(error, httpx.LocalProtocolError | httpx.InvalidURL):
        return HttpCallError(f"{type(error).__name__}: the request is malformed (its value is not shown)")
    return HttpCallError(f"{type(error).__name__}: {error or 'request failed'}")


def redacted_pairs(pairs: dict[str, str] | list[tuple[str, str]]) -> Any:
    """A copy of headers (dict) or query pairs (list of ``[name, value]``) redacted by toolgate.outbound.redaction."""
    if isinstance(pairs, dict):
        return redact_headers(pairs)
    return [[name, value] for name, value in redact_query_pairs(pairs)]


def _render_template(
    text: str, data: dict[str, Any], *, resolver: ReferenceResolver, allow_caller: bool, escape: Any
) -> str:
    """Render placeholders in the literal parts and resolve secret references between them."""
    pieces: list[str] = []
    position = 0
    for match in SECRET_REFERENCE.finditer(text):
        pieces.append(render(text[position : match.start()], data, escape=escape))
        pieces.append(resolver(match, allow_caller))
        position = match.end()
    pieces.append(render(text[position:], data, escape=escape))
    return "".join(pieces)


def _render_value(value: Any, fill: Any) -> Any:
    if isinstance(value, str):
        return fill(value)
    if isinstance(value, dict):
        return {key: _render_value(item, fill) for key, item in value.items()}
    if isinstance(value, list):
        return [_render_value(item, fill) for item in value]
    return value


def _build_body(body: Any, fill: Any) -> tuple[bytes | None, str | None]:
    if body is None:
        return None, None
    if isinstance(body, dict | list):
        rendered = _render_value(body, fill)
        return json.dumps(rendered, separators=(",", ":"), ensure_ascii=False).encode(), "application/json"
    text = fill(body)
    return text.encode(), "application/json" if _is_json_document(text) else "text/plain; charset=utf-8"


def _is_json_document(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict | list)
    except ValueError:
        return False


def _query_pairs(params: Any) -> list[tuple[str, Any]]:
    """Query parameters given as a dict (a list value repeats the name) or a list of {name, value}."""
    pairs: list[tuple[str, Any]] = []
    if isinstance(params, dict):
        for name, value in params.items():
            for item in value if isinstance(value, list) else [value]:
                pairs.append((str(name), _scalar_text(item)))
    elif isinstance(params, list):
        for item in params:
            if isinstance(item, dict) and "name" in item:
                pairs.append((str(item["name"]), _scalar_text(item.get("value"))))
            elif isinstance(item, list | tuple) and len(item) == 2:
                pairs.append((str(item[0]), _scalar_text(item[1])))
    return pairs


def _scalar_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def encode_query(pairs: list[tuple[str, str]]) -> str:
    """``name=value&…`` with every name and value percent-encoded (UTF-8), order and repeats kept."""
    return "&".join(
        f"{quote(name, safe=_QUERY_SAFE)}={quote(value, safe=_QUERY_SAFE)}" for name, value in pairs
    )


def _parse_query(text: str) -> list[tuple[str, str]]:
    """Decoded pairs in order; ``flag`` and ``flag=`` are both ``("flag", "")``."""
    return parse_qsl(text, keep_blank_values=True) if text else []


def _split_query(text: str) -> tuple[str, str | None]:
    """(before, after) the first ``?`` outside a ``${…}`` secret reference; after is None when there is none."""
    position = 0
    for match in SECRET_REFERENCE.finditer(text):
        found = text.find("?", position, match.start())
        if found >= 0:
            return text[:found], text[found + 1 :]
        position = match.end()
    found = text.find("?", position)
    return (text[:found], text[found + 1 :]) if found >= 0 else (text, None)


def _join_url(base: str, path: str) -> str:
    if not path:
        return base
    if not base:
        return path
    return base.rstrip("/") + "/" + path.lstrip("/")


def outbound_client(timeout: float) -> httpx.Client:
    """The client every outbound call uses: no redirects followed, and the egress guard while
    ``HITL_HTTP_DENY_PRIVATE`` is on."""
    from django.conf import settings

    if getattr(settings, "HITL_HTTP_DENY_PRIVATE", False):
        return httpx.Client(timeout=timeout, follow_redirects=False, transport=checked_transport())
    return httpx.Client(timeout=timeout, follow_redirects=False)


def _parse_body(response: httpx.Response) -> Any:
    if not response.content:
        return ""
    try:
        return response.json()
    except ValueError:
        return response.text


def without_secrets(value: Any, secrets: list[str]) -> Any:
    """``value`` (text or JSON-able data) with every resolved secret value replaced by <REDACTED>."""

    if not secrets:
        return value
    if isinstance(value, str):
        return replace_known_secrets(value, secrets)
    if isinstance(value, dict):
        return {key: without_secrets(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [without_secrets(item, secrets) for item in value]
    return value
