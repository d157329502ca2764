from __future__ import annotations

import gzip
import io
import zipfile
from typing import Any

import pytest

from evidence.fetch import FetchError, FetchPolicy, address_refusal, fetch
from tests.support.web_server import WebServer

from .conftest import ConnectAudit, slow_drip

PAGE = b"<!doctype html><html><head><title>T</title></head><body><p>Hello evidence.</p></body></html>"


def _code(url: str, policy: FetchPolicy) -> str:
    with pytest.raises(FetchError) as info:
        fetch(url, policy)
    return info.value.error_code


def _resolver(table: dict[str, list[str]], calls: list[str] | None = None):
    def resolve(host: str, port: int) -> list[str]:
        if calls is not None:
            calls.append(host)
        return table[host]

    return resolve


SSRF_URLS = [
    "http://127.0.0.1/",
    "http://127.8.9.1/",
    "http://localhost/",
    "http://0.0.0.0/",
    "http://[::]/",
    "http://[::1]/",
    "http://10.1.2.3/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://100.64.0.1/",
    "http://224.0.0.1/",
    "http://239.255.255.250/",
    "http://240.0.0.1/",
    "http://255.255.255.255/",
    "http://[fe80::1]/",
    "http://[fc00::1]/",
    "http://[ff02::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[2002:7f00:1::]/",
    "http://[2002:a9fe:a9fe::]/",
    "http://[::127.0.0.1]/",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0x7f.0.0.1/",
    "http://0177.0.0.1/",
    "http://017700000001/",
    "http://127.1/",
    "http://2852039166/",
    "http://0xa9.0xfe.0xa9.0xfe/",
    "http://0/",
]


@pytest.mark.parametrize("url", SSRF_URLS)
def test_it_refuses_non_global_addresses_before_connecting(url: str, connect_audit: ConnectAudit) -> None:
    assert _code(url, FetchPolicy()) == "blocked_address"
    assert connect_audit.connects == []


@pytest.mark.parametrize(
    "address",
    [
        "10.0.0.1",
        "169.254.169.254",
        "100.100.100.200",
        "fd00::1",
        "::ffff:10.0.0.1",
        "64:ff9b::a00:1",
        "2002:c0a8:101::1",
        "2001:db8::1",
    ],
)
def test_it_refuses_names_resolving_to_internal_addresses(address: str, connect_audit: ConnectAudit) -> None:
    policy = FetchPolicy(resolver=_resolver({"evil.example": [address]}))
    assert _code("http://evil.example/", policy) == "blocked_address"
    assert connect_audit.connects == []


def test_it_refuses_when_any_resolved_address_is_internal(connect_audit: ConnectAudit) -> None:
    policy = FetchPolicy(resolver=_resolver({"mixed.example": ["93.184.216.34", "127.0.0.1"]}))
    assert _code("http://mixed.example/", policy) == "blocked_address"
    assert connect_audit.connects == []


def test_it_refuses_loopback_server_by_default(web_server: WebServer, connect_audit: ConnectAudit) -> None:
    url = web_server.add("/page", PAGE)
    policy = FetchPolicy(allowed_ports=frozenset({web_server.port}))
    assert _code(url, policy) == "blocked_address"
    assert web_server.connections == 0
    assert connect_audit.connects == []


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("file:///etc/passwd", "bad_scheme"),
        ("ftp://example.org/x", "bad_scheme"),
        ("gopher://127.0.0.1:70/", "bad_scheme"),
        ("javascript:alert(1)", "bad_scheme"),
        ("http://example.org:22/", "bad_port"),
        ("http://example.org:6379/", "bad_port"),
        ("http://user:pw@example.org/", "bad_url"),
        ("http://example.org@127.0.0.1/", "bad_url"),
        ("http:///nohost", "bad_url"),
        ("http://exa mple.org/", "bad_url"),
        ("http://127.0.0.1\\@example.org/", "bad_url"),
    ],
)
def test_it_refuses_bad_urls_before_connecting(url: str, code: str, connect_audit: ConnectAudit) -> None:
    assert _code(url, FetchPolicy()) == code
    assert connect_audit.connects == []
    assert connect_audit.lookups == []


def test_it_fetches_a_page_with_pinned_ip_and_host_header(web_server: WebServer, test_policy: FetchPolicy) -> None:
    web_server.add("/page", PAGE)
    calls: list[str] = []
    policy = FetchPolicy(**{**test_policy.__dict__, "resolver": _resolver({"news.example": ["127.0.0.1"]}, calls)})
    result = fetch(f"http://news.example:{web_server.port}/page", policy)
    assert result.body == PAGE
    assert result.content_type == "text/html"
    assert result.peer_ip == "127.0.0.1"
    assert calls == ["news.example"]  # resolved once, then connected to that IP (no rebinding window)
    assert web_server.requests[0]["host"] == f"news.example:{web_server.port}"
    assert "CrowdNotes" in web_server.requests[0]["user-agent"]


def test_it_ignores_environment_proxies(
    web_server: WebServer, test_policy: FetchPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://10.9.9.9:3128")
    monkeypatch.setenv("http_proxy", "http://10.9.9.9:3128")
    url = web_server.add("/page", PAGE)
    assert fetch(url, test_policy).body == PAGE


def test_it_follows_redirects_and_records_them(web_server: WebServer, test_policy: FetchPolicy) -> None:
    web_server.add("/final", PAGE)
    web_server.add("/a", status=302, headers={"Location": "/final"})
    result = fetch(web_server.url("/a"), test_policy)
    assert result.final_url == web_server.url("/final")
    assert result.redirects == [web_server.url("/a")]


@pytest.mark.parametrize(
    "location",
    [
        "http://10.0.0.5/admin",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:192.168.0.1]/",
        "http://0x0a000001/",
        "file:///etc/passwd",
        "http://internal.example/",
    ],
)
def test_it_rechecks_every_redirect_hop(
    location: str, web_server: WebServer, test_policy: FetchPolicy, connect_audit: ConnectAudit
) -> None:
    policy = FetchPolicy(**{**test_policy.__dict__, "resolver": _resolver({"internal.example": ["192.168.7.7"]})})
    web_server.add("/r", status=301, headers={"Location": location})
    assert _code(web_server.url("/r"), policy) in ("blocked_address", "bad_scheme")
    (address,) = connect_audit.connects  # only the loopback test server itself
    assert isinstance(address, tuple) and address[0] == "127.0.0.1"


def test_it_caps_redirects(web_server: WebServer, test_policy: FetchPolicy) -> None:
    for i in range(5):
        web_server.add(f"/r{i}", status=302, headers={"Location": f"/r{i + 1}"})
    web_server.add("/r5", PAGE)
    assert _code(web_server.url("/r0"), test_policy) == "too_many_redirects"
    assert fetch(web_server.url("/r2"), test_policy).body == PAGE  # exactly 3 redirects is fine


def test_it_refuses_oversized_content_length_without_reading(web_server: WebServer, test_policy: FetchPolicy) -> None:
    web_server.add("/big", b"x" * 10, headers={"Content-Length": "999999999"})
    assert _code(web_server.url("/big"), test_policy) == "too_large"


def test_it_caps_the_stream_when_length_is_absent(web_server: WebServer, test_policy: FetchPolicy) -> None:
    def endless():
        yield b"<html><body>"
        for _ in range(10_000):
            yield b"<p>" + b"a" * 1000 + b"</p>"

    web_server.add("/stream", endless)
    assert _code(web_server.url("/stream"), test_policy) == "too_large"


def test_it_caps_decompressed_size_of_gzip_bombs(web_server: WebServer, test_policy: FetchPolicy) -> None:
    bomb = gzip.compress(b"<html><body>" + b" " * 5_000_000)
    assert len(bomb) < test_policy.max_bytes
    web_server.add("/bomb", bomb, headers={"Content-Encoding": "gzip"})
    assert _code(web_server.url("/bomb"), test_policy) == "too_large"


def test_it_hits_the_total_deadline_on_a_slow_drip(web_server: WebServer, test_policy: FetchPolicy) -> None:
    web_server.add("/drip", slow_drip(pieces=200, delay=0.05))
    policy = FetchPolicy(**{**test_policy.__dict__, "total_timeout": 1.0})
    assert _code(web_server.url("/drip"), policy) == "timeout"


def test_it_reports_http_errors(web_server: WebServer, test_policy: FetchPolicy) -> None:
    with pytest.raises(FetchError) as info:
        fetch(web_server.url("/missing"), test_policy)
    assert info.value.error_code == "http_error"
    assert info.value.status == 404


def test_it_reports_connection_refused(test_policy: FetchPolicy) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    policy = FetchPolicy(**{**test_policy.__dict__, "allowed_local": frozenset({("127.0.0.1", port)})})
    assert _code(f"http://127.0.0.1:{port}/", policy) == "connection_error"


def test_it_refuses_declared_unsupported_types(web_server: WebServer, test_policy: FetchPolicy) -> None:
    web_server.add("/img", b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, content_type="image/png")
    assert _code(web_server.url("/img"), test_policy) == "unsupported_type"


def test_it_refuses_binaries_lying_about_their_type(web_server: WebServer, test_policy: FetchPolicy) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("a.bin", bytes(range(256)) * 50)
    web_server.add("/zip", buffer.getvalue(), content_type="text/html")
    web_server.add("/png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 10, content_type="text/plain")
    web_server.add("/notpdf", PAGE, content_type="application/pdf")
    for path in ("/zip", "/png", "/notpdf"):
        assert _code(web_server.url(path), test_policy) == "unsupported_type", path


def test_it_sniffs_html_and_pdf_behind_generic_or_wrong_headers(
    web_server: WebServer, test_policy: FetchPolicy
) -> None:
    web_server.add("/octet", PAGE, content_type="application/octet-stream")
    web_server.add("/none", PAGE, content_type=None)
    web_server.add("/pdf-as-html", b"%PDF-1.4\n" + b"0" * 2000, content_type="text/html")
    assert fetch(web_server.url("/octet"), test_policy).content_type == "text/html"
    assert fetch(web_server.url("/none"), test_policy).content_type == "text/html"
    assert fetch(web_server.url("/pdf-as-html"), test_policy).content_type == "application/pdf"


def test_it_reports_declared_charset(web_server: WebServer, test_policy: FetchPolicy) -> None:
    web_server.add(
        "/latin",
        "<html><body><p>Caf\u00e9</p></body></html>".encode("latin-1"),
        content_type="text/html; charset=ISO-8859-1",
    )
    result = fetch(web_server.url("/latin"), test_policy)
    assert result.charset == "iso-8859-1"


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("93.184.216.34", False),
        ("2606:2800:220:1::1", False),
        ("100.64.1.1", True),
        ("::ffff:8.8.8.8", False),
        ("64:ff9b::808:808", False),
        ("64:ff9b:1::1", True),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", True),
    ],
)
def test_it_classifies_addresses(address: str, refused: bool) -> None:
    assert (address_refusal(address) is not None) is refused


@pytest.fixture
def tls_server(tmp_path: Any) -> Any:
    """HTTPS on loopback with a self-signed certificate for the name secure.test."""
    import shutil
    import ssl
    import subprocess
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [shutil.which("openssl") or "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=secure.test", "-addext", "subjectAltName=DNS:secure.test"],
        check=True, capture_output=True,
    )  # fmt: skip
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.headers["Host"])
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], str(cert), seen
    server.shutdown()
    server.server_close()


def test_it_verifies_tls_for_the_name_while_connecting_to_the_pinned_ip(tls_server: Any) -> None:
    port, cert, seen = tls_server
    policy = FetchPolicy(
        allowed_local=frozenset({("127.0.0.1", port)}),
        ca_certs=cert,
        resolver=_resolver({"secure.test": ["127.0.0.1"]}),
    )
    result = fetch(f"https://secure.test:{port}/", policy)
    assert result.body == PAGE
    assert seen == [f"secure.test:{port}"]


def test_it_refuses_certificates_for_another_name_or_untrusted(tls_server: Any) -> None:
    port, cert, _ = tls_server
    wrong_name = FetchPolicy(
        allowed_local=frozenset({("127.0.0.1", port)}), ca_certs=cert, resolver=_resolver({"other.test": ["127.0.0.1"]})
    )
    assert _code(f"https://other.test:{port}/", wrong_name) == "tls_error"
    untrusted = FetchPolicy(
        allowed_local=frozenset({("127.0.0.1", port)}), resolver=_resolver({"secure.test": ["127.0.0.1"]})
    )
    assert _code(f"https://secure.test:{port}/", untrusted) == "tls_error"


# --- The local allow-list: exact host:port pairs, never the app, the database or Redis ---------------


def _listening_server(page: bytes = PAGE) -> WebServer:
    """A second loopback server (an app or service that is not on the allow-list)."""
    other = WebServer()
    other.add("/", page)
    return other


def test_it_parses_the_allow_list_and_refuses_anything_but_ip_or_localhost_with_a_port() -> None:
    from evidence.fetch import parse_host_ports

    assert parse_host_ports(["127.0.0.1:8001", "[::1]:9", "localhost:7"]) == {
        ("127.0.0.1", 8001),
        ("::1", 9),
        ("127.0.0.1", 7),
        ("::1", 7),
    }
    for bad in ["127.0.0.1", "127.0.0.0/8:80", "pages.internal:80", "127.0.0.1:0", "127.0.0.1:http"]:
        with pytest.raises(ValueError):
            parse_host_ports([bad])


def test_it_fetches_only_the_listed_pair_on_loopback(web_server: WebServer, test_policy: FetchPolicy) -> None:
    other = _listening_server()
    try:
        assert fetch(web_server.add("/page", PAGE), test_policy).body == PAGE
        assert _code(f"http://127.0.0.1:{other.port}/", test_policy) == "bad_port"
        # The listed port on another loopback address is not the listed pair either.
        assert _code(f"http://127.0.0.2:{web_server.port}/page", test_policy) == "blocked_address"
        assert other.connections == 0
    finally:
        other.close()


@pytest.mark.parametrize("status", [301, 302, 307])
def test_it_refuses_a_redirect_from_the_listed_server_to_another_local_port(
    web_server: WebServer, test_policy: FetchPolicy, status: int
) -> None:
    other = _listening_server(b"<html><body>the app's own login page</body></html>")
    try:
        web_server.add("/hop", b"", status=status, headers={"Location": f"http://127.0.0.1:{other.port}/"})
        web_server.add("/hop6", b"", status=status, headers={"Location": f"http://[::1]:{web_server.port}/page"})
        assert _code(web_server.url("/hop"), test_policy) == "bad_port"
        assert _code(web_server.url("/hop6"), test_policy) == "blocked_address"
        assert other.connections == 0
    finally:
        other.close()


def test_it_never_fetches_a_forbidden_port_even_when_listed(web_server: WebServer, test_policy: FetchPolicy) -> None:
    policy = FetchPolicy(**{**test_policy.__dict__, "never_local_ports": frozenset({web_server.port})})
    assert _code(web_server.add("/page", PAGE), policy) == "blocked_address"
    assert web_server.connections == 0


def test_the_app_policy_refuses_its_own_port_the_database_and_redis(settings: Any, connect_audit: ConnectAudit) -> None:
    from evidence.services import fetch_policy

    settings.EVIDENCE_ALLOWED_LOCAL = ["127.0.0.1:5432", "127.0.0.1:6379", "localhost:8000", "127.0.0.1:8001"]
    settings.EVIDENCE_NEVER_LOCAL_PORTS = [5432, 6379, 8000]
    policy = fetch_policy()
    for port in (5432, 6379, 8000):
        assert _code(f"http://127.0.0.1:{port}/", policy) == "blocked_address"
    assert connect_audit.connects == []


def test_the_default_settings_never_allow_the_database_redis_or_the_site_port(settings: Any) -> None:
    from urllib.parse import urlsplit

    assert settings.EVIDENCE_ALLOWED_LOCAL == []
    never = set(settings.EVIDENCE_NEVER_LOCAL_PORTS)
    assert {urlsplit(settings.DATABASE_URL).port or 5432, urlsplit(settings.REDIS_URL).port or 6379, 8000} <= never


def test_the_start_up_check_names_a_bad_allow_list(settings: Any) -> None:
    from evidence.checks import evidence_allowed_local

    settings.EVIDENCE_ALLOWED_LOCAL = ["127.0.0.1:8001"]
    assert evidence_allowed_local() == []
    settings.EVIDENCE_ALLOWED_LOCAL = ["127.0.0.1/8"]
    assert [e.id for e in evidence_allowed_local()] == ["evidence.E001"]
    settings.EVIDENCE_NEVER_LOCAL_PORTS = [6379]
    settings.EVIDENCE_ALLOWED_LOCAL = ["localhost:6379"]
    assert [e.id for e in evidence_allowed_local()] == ["evidence.E002", "evidence.E002"]
