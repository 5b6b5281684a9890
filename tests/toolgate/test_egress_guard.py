"""The egress guard of declared http calls (toolgate/outbound/egress.py) with ``HITL_HTTP_DENY_PRIVATE`` on: non-public
addresses are refused in every spelling, an operator's allow-list lets trusted internal hosts through, and the
connection goes to the very address that was checked (DNS rebinding cannot swap it), keeping the host name
for ``Host``, SNI and the certificate check.

Every target is a real server on loopback (tests/conversations/conftest.py). Name resolution is the one
collaborator replaced: ``socket.getaddrinfo`` answers for the test's own names (like a hosts file), counts
their lookups, and leaves every other host to the system.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from django.core import checks

from approvals.checks import TAG
from conversations.pipeline import httpcalls_task
from conversations.pipeline.conversation_memory import ConversationMemory, Step
from conversations.pipeline.registry import TurnContext
from tests.conversations.conftest import LoopbackServer, running_loopback_server
from toolgate.gate.tools import ToolCall, ToolContext, build_toolset
from toolgate.outbound import http_calls
from toolgate.outbound.egress import AllowList, address_allowed, parse_allow_list
from toolgate.runtime.execution import run_call
from toolgate.runtime.sources import http_tools

REFUSED = "refusing to call"

# Spellings of a loopback address: with the guard off each one reaches a server on 127.0.0.1.
LOOPBACK_FORMS = [
    "127.0.0.1",
    "2130706433",  # decimal
    "0x7f000001",  # hex
    "017700000001",  # octal
    "0x7f.1",
    "127.1",  # short form
    "[::ffff:127.0.0.1]",  # IPv4-mapped IPv6
    "0.0.0.0",  # the unspecified address reaches loopback
    "localhost",
]
# Every other non-public kind: refused before any connection is tried.
NON_PUBLIC_FORMS = [
    "127.0.0.2",
    "[::1]",
    "[0:0:0:0:0:0:0:1]",
    "[::]",
    "169.254.169.254",  # cloud metadata (link-local)
    "[::ffff:169.254.169.254]",
    "[fe80::1]",
    "10.0.0.1",
    "172.16.0.1",
    "192.168.1.1",
    "[::ffff:10.0.0.1]",
    "[fc00::1]",
    "[fd12:3456::1]",
    "100.64.0.1",  # carrier-grade NAT
    "224.0.0.1",  # multicast
    "[ff02::1]",
    "[ff0e::1]",
    "240.0.0.1",  # reserved
    "255.255.255.255",
    "192.0.2.1",  # documentation
    "198.51.100.7",
    "203.0.113.9",
    "198.18.0.1",  # benchmarking
    "[2001:db8::1]",
    "[64:ff9b::7f00:1]",  # NAT64 of 127.0.0.1
    "[64:ff9b::a00:1]",  # NAT64 of 10.0.0.1
    "[2002:7f00:1::]",  # 6to4 of 127.0.0.1
    "[::7f00:1]",  # IPv4-compatible (deprecated) form of 127.0.0.1
]


@dataclass
class Resolver:
    """``socket.getaddrinfo`` for the names in ``answers`` (each lookup takes the next answer; the last one
    repeats; a trailing dot is the same name), the system's for every other host."""

    system: Any
    answers: dict[str, list[list[str]]] = field(default_factory=dict)
    lookups: Counter[str] = field(default_factory=Counter)

    def answer(self, name: str, *answers: list[str]) -> None:
        self.answers[name] = list(answers)

    def getaddrinfo(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        name = (host.decode() if isinstance(host, bytes) else str(host)).lower().removesuffix(".")
        if name not in self.answers:
            return self.system(host, port, *args, **kwargs)
        self.lookups[name] += 1
        queue = self.answers[name]
        addresses = queue.pop(0) if len(queue) > 1 else queue[0]
        number = int(port or 0)
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, number, 0, 0))
            if ipaddress.ip_address(address).version == 6
            else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, number))
            for address in addresses
        ]


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Resolver:
    fake = Resolver(system=socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", fake.getaddrinfo)
    return fake


@pytest.fixture
def guard(settings: Any) -> Any:
    """The guard on, with an empty allow-list; a test sets ``guard.HITL_HTTP_ALLOW_PRIVATE`` when it needs one."""
    settings.HITL_HTTP_DENY_PRIVATE = True
    settings.HITL_HTTP_ALLOW_PRIVATE = ""
    settings.HITL_HTTP_TIMEOUT_SECONDS = 5
    return settings


def probe_task(target: str, **call_overrides: Any) -> dict[str, Any]:
    call = {"name": "probe", "actions": ["probe"], "request": {"method": "GET", "path": "/probe"}}
    call.update(call_overrides)
    return {"id": "egress", "type": "httpcalls", "targetServerUrl": target, "calls": [call]}


def rule_fired(task: dict[str, Any]) -> dict[str, Any]:
    """The result of the task's call fired by a behaviour rule's action."""
    memory = ConversationMemory("c1", current=Step(input="go", actions=["probe"]))
    httpcalls_task.run(task, memory, TurnContext({}, "c1"))
    return memory.current.outputs["probe"]


def tool_result(task: dict[str, Any], arguments: str) -> Any:
    """The result of the task's call offered to the model as an http tool and called with ``arguments``."""
    toolset = build_toolset({"http": http_tools(task)})
    return run_call(ToolCall(id="call-1", name="probe", arguments=arguments), toolset, ToolContext("c1"))


@pytest.mark.parametrize("host", LOOPBACK_FORMS + NON_PUBLIC_FORMS)
def test_every_non_public_address_form_is_refused_and_nothing_is_sent(
    guard: Any, loopback_server: LoopbackServer, host: str
) -> None:
    result = rule_fired(probe_task(f"http://{host}:{loopback_server.port}"))

    assert REFUSED in result["error"] and "non-public address" in result["error"], result
    assert host.strip("[]").lower() in result["error"]  # names the host it refused
    assert loopback_server.received == []


@pytest.mark.parametrize("host", LOOPBACK_FORMS)
def test_the_loopback_forms_do_reach_loopback_when_the_guard_is_off(
    settings: Any, loopback_server: LoopbackServer, host: str
) -> None:
    """What the guard refuses is a live route: off, each spelling lands on the server on 127.0.0.1."""
    settings.HITL_HTTP_DENY_PRIVATE = False

    assert rule_fired(probe_task(f"http://{host}:{loopback_server.port}")) == {
        "status": 200,
        "body": {"ok": True},
    }
    assert [request.path for request in loopback_server.received] == ["/probe"]


def test_octal_dotted_quad_is_refused_as_a_malformed_url(guard: Any, loopback_server: LoopbackServer) -> None:
    result = rule_fired(probe_task(f"http://0177.0.0.1:{loopback_server.port}"))

    assert "InvalidURL" in result["error"] and loopback_server.received == []


@pytest.mark.parametrize(
    "addresses", [["93.184.215.14", "127.0.0.1"], ["127.0.0.1", "93.184.215.14"], ["2606:4700::1111", "::1"]]
)
def test_a_name_is_refused_when_any_one_of_its_addresses_is_not_public(
    guard: Any, resolver: Resolver, loopback_server: LoopbackServer, addresses: list[str]
) -> None:
    resolver.answer("mixed.example", addresses)

    result = rule_fired(probe_task(f"http://mixed.example:{loopback_server.port}"))

    assert result["error"].startswith("refusing to call mixed.example: it resolves to a non-public address")
    assert not any(address in result["error"] for address in addresses)  # the caller learns no address
    assert loopback_server.received == []


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("::ffff:127.0.0.1", False),
        ("::ffff:8.8.8.8", True),
        ("64:ff9b::7f00:1", False),
        ("64:ff9b::808:808", True),  # what DNS64 answers for a public IPv4-only host
        ("2002:7f00:1::", False),
        ("2002:808:808::", True),
        ("::7f00:1", False),
        ("2606:4700::1111", True),
    ],
)
def test_an_ipv6_address_carrying_ipv4_is_judged_by_the_ipv4_it_carries(address: str, allowed: bool) -> None:
    assert address_allowed(ipaddress.ip_address(address), allowed=AllowList()) is allowed


def test_an_allow_listed_network_covers_the_ipv4_mapped_form_of_its_addresses() -> None:
    internal = parse_allow_list("10.20.0.0/16")[0]

    assert address_allowed(ipaddress.ip_address("::ffff:10.20.3.4"), allowed=internal)
    assert not address_allowed(ipaddress.ip_address("::ffff:10.21.3.4"), allowed=internal)


def test_a_name_that_resolves_to_cloud_metadata_is_refused(guard: Any, resolver: Resolver) -> None:
    resolver.answer("metadata.example", ["169.254.169.254"])

    result = rule_fired(probe_task("http://metadata.example/latest/meta-data/"))

    assert result["error"].startswith("refusing to call metadata.example")


def test_an_allow_listed_host_name_reaches_its_private_address_and_keeps_its_host_header(
    guard: Any, resolver: Resolver, loopback_server: LoopbackServer
) -> None:
    guard.HITL_HTTP_ALLOW_PRIVATE = "payments.internal"
    resolver.answer("payments.internal", ["127.0.0.1"])
    resolver.answer("other.internal", ["127.0.0.1"])

    allowed = rule_fired(probe_task(f"http://Payments.Internal.:{loopback_server.port}"))
    other = rule_fired(probe_task(f"http://other.internal:{loopback_server.port}"))

    assert allowed == {"status": 200, "body": {"ok": True}}
    assert [request.headers["host"] for request in loopback_server.received] == [
        f"payments.internal.:{loopback_server.port}"
    ]
    assert other["error"].startswith(
        "refusing to call other.internal"
    )  # the name, not the address, is listed


def test_an_address_inside_an_allow_listed_network_is_reached(
    guard: Any, resolver: Resolver, loopback_server: LoopbackServer
) -> None:
    resolver.answer("svc.internal", ["127.0.0.1"])
    guard.HITL_HTTP_ALLOW_PRIVATE = "10.0.0.0/8"
    outside = rule_fired(probe_task(f"http://svc.internal:{loopback_server.port}"))
    guard.HITL_HTTP_ALLOW_PRIVATE = "payments.internal, 10.0.0.0/8,127.0.0.0/8"

    by_name = rule_fired(probe_task(f"http://svc.internal:{loopback_server.port}"))
    by_address = rule_fired(probe_task(f"http://127.0.0.1:{loopback_server.port}"))

    assert outside["error"].startswith("refusing to call svc.internal")
    assert by_name == by_address == {"status": 200, "body": {"ok": True}}
    assert [request.headers["host"] for request in loopback_server.received] == [
        f"svc.internal:{loopback_server.port}",
        f"127.0.0.1:{loopback_server.port}",
    ]


def test_a_bad_allow_list_entry_allows_nothing(guard: Any, loopback_server: LoopbackServer) -> None:
    guard.HITL_HTTP_ALLOW_PRIVATE = "127.0.0.1/8,http://127.0.0.1"

    result = rule_fired(probe_task(f"http://127.0.0.1:{loopback_server.port}"))

    assert REFUSED in result["error"] and loopback_server.received == []


@pytest.fixture
def checked_and_rebound() -> Iterator[tuple[LoopbackServer, LoopbackServer]]:
    """A server on 127.0.0.2 (the address the check sees) and one on 127.0.0.1 (the address a second lookup
    would give), on the same port."""
    for _ in range(20):
        with ExitStack() as servers:
            checked = servers.enter_context(running_loopback_server("127.0.0.2"))
            try:
                rebound = servers.enter_context(running_loopback_server("127.0.0.1", checked.port))
            except OSError:  # that port is taken on 127.0.0.1: try another one
                continue
            yield checked, rebound
            return
    raise AssertionError("no port free on both 127.0.0.2 and 127.0.0.1")


def test_a_name_rebound_after_the_check_is_still_connected_to_the_checked_address(
    guard: Any, resolver: Resolver, checked_and_rebound: tuple[LoopbackServer, LoopbackServer]
) -> None:
    """DNS rebinding: the first answer passes the check (127.0.0.2 is allow-listed), every later answer is
    127.0.0.1. The name is looked up once and the request lands where the check looked."""
    checked, rebound = checked_and_rebound
    guard.HITL_HTTP_ALLOW_PRIVATE = "127.0.0.2/32"
    resolver.answer("rebind.example", ["127.0.0.2"], ["127.0.0.1"])

    result = rule_fired(probe_task(f"http://rebind.example:{checked.port}"))

    assert result == {"status": 200, "body": {"ok": True}}
    assert rebound.received == []
    assert [request.headers["host"] for request in checked.received] == [f"rebind.example:{checked.port}"]
    assert resolver.lookups["rebind.example"] == 1


def test_every_retry_attempt_is_checked_against_its_own_lookup(
    guard: Any, resolver: Resolver, checked_and_rebound: tuple[LoopbackServer, LoopbackServer]
) -> None:
    checked, rebound = checked_and_rebound
    guard.HITL_HTTP_ALLOW_PRIVATE = "127.0.0.2/32"
    resolver.answer("rebind.example", ["127.0.0.2"], ["127.0.0.1"])
    checked.respond("/probe", status=503, json_body={"state": "busy"})
    retry = {"maxRetries": 2, "exponentialBackoffDelayInMillis": 0, "retryOnHttpCodes": [503]}

    result = rule_fired(
        probe_task(f"http://rebind.example:{checked.port}", postResponse={"retryApiCallInstruction": retry})
    )

    assert result["error"].startswith("refusing to call rebind.example") and result["attempts"] == 2
    assert len(checked.received) == 1 and rebound.received == []
    assert resolver.lookups["rebind.example"] == 2  # once per attempt, never twice for one


def test_a_fire_and_forget_call_is_checked_too(
    guard: Any, resolver: Resolver, loopback_server: LoopbackServer
) -> None:
    resolver.answer("notify.internal", ["127.0.0.1"])

    refused = rule_fired(probe_task(f"http://notify.internal:{loopback_server.port}", fireAndForget=True))
    guard.HITL_HTTP_ALLOW_PRIVATE = "notify.internal"
    allowed = rule_fired(probe_task(f"http://notify.internal:{loopback_server.port}", fireAndForget=True))

    assert refused["error"].startswith("refusing to call notify.internal")
    assert allowed == {"sent": True, "status": 200}
    assert len(loopback_server.received) == 1


def test_an_http_tool_cannot_reach_a_private_host_the_model_chose(
    guard: Any, loopback_server: LoopbackServer
) -> None:
    """The model fills a host label; the numeric spellings of loopback it can write there are refused by
    the guard, and a value cannot carry a port or an IPv6 literal at all (values substituted into
    targetServerUrl keep unreserved characters only)."""
    task = probe_task(
        "http://{args.host}:" + str(loopback_server.port),
        parameters={"type": "object", "properties": {"host": {"type": "string"}}},
    )

    results = [
        tool_result(task, json.dumps({"host": host}))
        for host in ("2130706433", "0x7f000001", "127.1", "127.0.0.1")
    ]
    smuggled = tool_result(task, json.dumps({"host": "[::ffff:127.0.0.1]"}))

    assert all(REFUSED in result["error"] for result in results), results
    assert "error" in smuggled and REFUSED not in smuggled["error"]
    assert loopback_server.received == []


def test_redirects_are_not_followed(guard: Any, resolver: Resolver, loopback_server: LoopbackServer) -> None:
    guard.HITL_HTTP_ALLOW_PRIVATE = "redirector.internal"
    resolver.answer("redirector.internal", ["127.0.0.1"])
    target = f"http://redirector.internal:{loopback_server.port}"
    loopback_server.respond("/probe", status=302, json_body={}, headers={"Location": f"{target}/private"})

    result = rule_fired(probe_task(target))

    assert result["status"] == 302
    assert [request.path for request in loopback_server.received] == ["/probe"]


def issue_certificate(directory: Path, name: str) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key) files: a test CA and a certificate for ``name``."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "egress test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


def test_an_https_target_is_verified_for_its_host_name_not_the_address_connected_to(
    guard: Any, resolver: Resolver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca_file, certificate, key = issue_certificate(tmp_path, "payments.internal")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))  # the CA httpx trusts (as the default transport does)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(certificate, key)
    server_names: list[str | None] = []
    server_context.sni_callback = lambda connection, name, context: server_names.append(name)
    guard.HITL_HTTP_ALLOW_PRIVATE = "payments.internal,impostor.internal"
    resolver.answer("payments.internal", ["127.0.0.1"])
    resolver.answer("impostor.internal", ["127.0.0.1"])

    with running_loopback_server(tls=server_context) as server:
        verified = rule_fired(probe_task(f"https://payments.internal:{server.port}"))
        impostor = rule_fired(probe_task(f"https://impostor.internal:{server.port}"))

    assert verified == {"status": 200, "body": {"ok": True}}
    assert [request.headers["host"] for request in server.received] == [f"payments.internal:{server.port}"]
    assert server_names[0] == "payments.internal"
    assert "ConnectError" in impostor["error"] and "CERTIFICATE_VERIFY_FAILED" in impostor["error"], impostor
    assert "impostor.internal" in server_names  # it was asked for by name, and the name did not match


def test_a_transport_that_cannot_be_given_the_checked_connections_refuses_to_send(
    guard: Any, loopback_server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pins how the guard is wired into httpx: should httpx keep its connection pool elsewhere, the call
    fails closed instead of connecting unchecked."""
    guard.HITL_HTTP_ALLOW_PRIVATE = "127.0.0.0/8"  # so only the wiring can refuse
    original_init = httpx.HTTPTransport.__init__

    def init_without_pool(self: httpx.HTTPTransport, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        del self._pool

    reached = rule_fired(probe_task(f"http://127.0.0.1:{loopback_server.port}"))
    monkeypatch.setattr(httpx.HTTPTransport, "__init__", init_without_pool)
    refused = rule_fired(probe_task(f"http://127.0.0.1:{loopback_server.port}"))

    assert reached == {"status": 200, "body": {"ok": True}}
    assert refused == {"error": "the call failed: RuntimeError"}
    assert len(loopback_server.received) == 1


def test_the_one_call_runner_refuses_on_its_own(guard: Any, loopback_server: LoopbackServer) -> None:
    """The one implementation behind rule-fired calls and http tools refuses on its own."""
    task = probe_task(f"http://127.0.0.1:{loopback_server.port}")

    result = http_calls.run_http_call(
        task, task["calls"][0], {}, caller_token=None, effects=http_calls.CallEffects()
    )

    assert REFUSED in result["error"] and loopback_server.received == []


def egress_checks() -> list[checks.CheckMessage]:
    return [message for message in checks.run_checks(tags=[TAG]) if message.id.endswith("006")]


def test_a_bad_allow_list_entry_is_a_warning_in_development(settings: Any) -> None:
    settings.HITL_HTTP_ALLOW_PRIVATE = "payments.internal,10.20.0.1/16,https://x.internal"

    messages = egress_checks()

    assert [(message.id, message.level) for message in messages] == [("hitl.W006", checks.WARNING)]
    assert "HITL_HTTP_ALLOW_PRIVATE: '10.20.0.1/16' is not a network" in messages[0].msg
    assert "(and 1 more)" in messages[0].msg and "10.20.0.0/16" in messages[0].hint


def test_a_bad_allow_list_entry_is_an_error_under_production_settings(settings: Any) -> None:
    settings.HITL_STRICT_CONFIG = True
    settings.HITL_HTTP_ALLOW_PRIVATE = "10.20.0.0/33"

    assert [(message.id, message.level) for message in egress_checks()] == [("hitl.E006", checks.ERROR)]


def test_a_good_allow_list_passes_the_checks(settings: Any) -> None:
    settings.HITL_STRICT_CONFIG = True
    settings.HITL_HTTP_ALLOW_PRIVATE = " payments.internal , 10.20.0.0/16,fd00::/8,10.1.2.3,svc_a.local."

    assert egress_checks() == []
