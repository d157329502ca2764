"""Safe fetching of user-supplied URLs: the only code in CrowdNotes that requests them.

Every hop (first request and each redirect) is validated the same way: scheme, port, host
syntax, DNS resolution, and every resolved address must be globally routable. We then connect
to the validated IP itself (Host header and TLS SNI keep the name), so a second DNS answer can
never redirect the connection (no DNS-rebinding TOCTOU), and the connection class re-checks the
peer address right before connect().

We use urllib3 rather than raw sockets: it gives correct HTTP/1.1 framing (chunked, keep-alive,
content decoding), certificate verification with SNI/assert_hostname for a pinned IP, and it
never reads proxy settings from the environment (httpx and requests do), which is what we want.
"""

from __future__ import annotations

import concurrent.futures
import ipaddress
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from evidence.errors import FetchError

USER_AGENT = (
    "CrowdNotesEvidenceBot/1.0 (+https://crowdnotes.invalid/bot; fetches evidence URLs submitted by contributors)"
)

HTML = "text/html"
TEXT = "text/plain"
PDF = "application/pdf"

_DECLARED_OK = {"text/html": HTML, "application/xhtml+xml": HTML, "text/plain": TEXT, "application/pdf": PDF}
# Declared types that say nothing about the body: we decide by sniffing alone.
_DECLARED_GENERIC = {"", "application/octet-stream", "binary/octet-stream", "application/unknown", "unknown/unknown"}
_REDIRECTS = {301, 302, 303, 307, 308}
_HOST_RE = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,62}\.?)*$")
# inet_aton() accepts 1-4 parts in decimal, octal (leading 0) or hex (0x): 2130706433, 0x7f.1, 0177.0.0.1.
_NUMERIC_HOST_RE = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}\.?$")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")

Resolver = Callable[[str, int], list[str]]


@dataclass(frozen=True)
class FetchPolicy:
    max_bytes: int = 10 * 1024 * 1024
    total_timeout: float = 15.0
    connect_timeout: float = 5.0
    max_redirects: int = 3
    allowed_ports: frozenset[int] = frozenset({80, 443})
    # Non-public addresses that may be fetched anyway, as exact (IP, port) pairs: the page server
    # of the demo or of the tests. Any other loopback or private address:port stays refused.
    allowed_local: frozenset[tuple[str, int]] = frozenset()
    # Ports never fetched on a non-public address, even when listed above: the app's own port,
    # the database and Redis (a misconfigured allow-list must not open them).
    never_local_ports: frozenset[int] = frozenset()
    # Environment proxies (HTTP_PROXY ...) are never used; an operator may configure one here.
    proxy_url: str | None = None
    user_agent: str = USER_AGENT
    # Hook for tests and for custom DNS; must return IP address strings.
    resolver: Resolver | None = None
    # Extra CA bundle (a private CA, or the tests' self-signed certificate); system CAs otherwise.
    ca_certs: str | None = None


@dataclass
class FetchResult:
    url: str
    final_url: str
    status: int
    content_type: str  # sniffed and allowed: text/html, text/plain or application/pdf
    declared_content_type: str
    charset: str | None  # from the Content-Type header, if any
    body: bytes
    redirects: list[str] = field(default_factory=list)
    peer_ip: str = ""
    elapsed_ms: int = 0


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    found = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    if ip in _NAT64:
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if int(ip) >> 32 == 0 and int(ip) > 1:  # deprecated IPv4-compatible ::a.b.c.d
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return found


def parse_host_ports(entries: list[str]) -> frozenset[tuple[str, int]]:
    """`["127.0.0.1:8001", "[::1]:8001", "localhost:8001"]` → (IP, port) pairs; "localhost" means
    127.0.0.1 and ::1. Raises ValueError on anything else (names are not resolved: an explicit list)."""
    pairs: set[tuple[str, int]] = set()
    for entry in entries:
        host, sep, port_text = entry.strip().rpartition(":")
        if not sep or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"{entry!r} is not host:port")
        host = host.strip("[]")
        addresses = ["127.0.0.1", "::1"] if host.lower() == "localhost" else [host]
        for address in addresses:
            try:
                pairs.add((str(ipaddress.ip_address(address)), int(port_text)))
            except ValueError:
                raise ValueError(f"{entry!r}: the host must be an IP address or localhost") from None
    return frozenset(pairs)


def _local_allowed(policy: FetchPolicy, address: str, port: int) -> bool:
    """The (address, port) pair is named in the policy's allow-list (and is not a forbidden port)."""
    try:
        ip = str(ipaddress.ip_address(address.split("%", 1)[0]))
    except ValueError:
        return False
    return port not in policy.never_local_ports and (ip, port) in policy.allowed_local


def address_refusal(address: str) -> str | None:
    """Why an IP must not be contacted, or None when it is globally routable."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _NAT64_LOCAL:
            return "local-use NAT64 address"
        if ip.ipv4_mapped is not None or ip in _NAT64:
            # These forms reach exactly the embedded IPv4 host: judge that host alone.
            inner_reason = address_refusal(str(_embedded_ipv4(ip)[0]))
            return f"IPv6 form of a refused IPv4 address ({inner_reason})" if inner_reason else None
        for inner in _embedded_ipv4(ip):
            reason = address_refusal(str(inner))
            if reason:
                return f"IPv6 form of a refused IPv4 address ({reason})"
    for flag in ("is_unspecified", "is_loopback", "is_link_local", "is_multicast", "is_private", "is_reserved"):
        if getattr(ip, flag):
            return flag.removeprefix("is_").replace("_", "-") + " address"
    if not ip.is_global:  # carrier-grade NAT 100.64/10, documentation ranges, ...
        return "not globally routable"
    return None


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str  # IDNA-encoded name or IP literal (no brackets)
    port: int
    request_target: str
    host_header: str


def _parse(url: str, policy: FetchPolicy) -> _Target:
    if len(url) > 4096 or any(ch in url for ch in "\r\n\t\x00 \\"):
        raise FetchError("bad_url", "URL too long or has forbidden characters", url=url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise FetchError("bad_url", str(exc), url=url) from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise FetchError("bad_scheme", f"scheme {scheme or '(none)'!r} is not http or https", url=url)
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise FetchError("bad_url", "credentials in URLs are not allowed", url=url)
    raw_host = (parts.hostname or "").rstrip(".")
    if not raw_host:
        raise FetchError("bad_url", "missing host", url=url)
    port = port if port is not None else (443 if scheme == "https" else 80)
    # A port of an allow-listed local pair is checked again after resolution (that address only).
    if port not in policy.allowed_ports and all(port != local for _, local in policy.allowed_local):
        raise FetchError("bad_port", f"port {port} is not allowed", url=url)
    try:
        ip = ipaddress.ip_address(raw_host)
        host = str(ip)
    except ValueError:
        if _NUMERIC_HOST_RE.match(raw_host):
            # Decimal/hex/octal IPv4 spellings: decode them as the C library would, then check.
            try:
                host = socket.inet_ntoa(socket.inet_aton(raw_host))
            except OSError as exc:
                raise FetchError("bad_url", f"malformed numeric host {raw_host!r}", url=url) from exc
            reason = address_refusal(host)
            raise FetchError(
                "blocked_address", f"numeric host {raw_host!r} is {host}: {reason or 'ambiguous spelling'}", url=url
            ) from None
        try:
            host = raw_host.encode("idna").decode("ascii").lower()
        except UnicodeError as exc:
            raise FetchError("bad_url", f"invalid host name {raw_host!r}", url=url) from exc
        if not _HOST_RE.match(host) or len(host) > 253:
            raise FetchError("bad_url", f"invalid host name {raw_host!r}", url=url) from None
    request_target = parts.path or "/"
    if parts.query:
        request_target += "?" + parts.query
    host_for_header = f"[{host}]" if ":" in host else host
    default_port = 443 if scheme == "https" else 80
    host_header = host_for_header if port == default_port else f"{host_for_header}:{port}"
    return _Target(scheme, host, port, request_target, host_header)


def precheck(url: str, policy: FetchPolicy) -> None:
    """The checks that need no network (scheme, port, host syntax, IP literals and numeric
    spellings): raises the same FetchError `fetch` would. Host names are resolved and checked
    only by `fetch` itself, in the worker."""
    target = _parse(url, policy)
    try:
        ipaddress.ip_address(target.host)
    except ValueError:
        return
    if _local_allowed(policy, target.host, target.port):
        return
    reason = address_refusal(target.host)
    if reason:
        raise FetchError("blocked_address", f"{target.host}:{target.port}: {reason}", url=url)


def _system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


_dns_pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="evidence-dns")


def _resolve(target: _Target, policy: FetchPolicy, deadline: float, url: str) -> str:
    try:
        ipaddress.ip_address(target.host)
        addresses = [target.host]
    except ValueError:
        resolver = policy.resolver or _system_resolver
        # getaddrinfo has no timeout of its own: run it in a thread so the total deadline holds.
        future = _dns_pool.submit(resolver, target.host, target.port)
        try:
            addresses = future.result(timeout=max(0.01, deadline - time.monotonic()))
        except concurrent.futures.TimeoutError as exc:
            raise FetchError("timeout", "DNS resolution exceeded the deadline", url=url) from exc
        except (OSError, UnicodeError) as exc:
            raise FetchError("dns_error", f"cannot resolve {target.host}: {exc}", url=url) from exc
    if not addresses:
        raise FetchError("dns_error", f"no address for {target.host}", url=url)
    # Refuse if ANY answer is non-global: an attacker's zone can mix public and private records.
    for address in addresses:
        if _local_allowed(policy, address, target.port):
            continue
        reason = address_refusal(address)
        if reason:
            raise FetchError("blocked_address", f"{target.host}:{target.port} resolves to {address}: {reason}", url=url)
    if target.port not in policy.allowed_ports and not all(_local_allowed(policy, a, target.port) for a in addresses):
        raise FetchError("bad_port", f"port {target.port} is not allowed", url=url)
    return addresses[0]


class _GuardMixin:
    """Re-checks the peer right before connect(): the pool only ever holds a validated IP."""

    policy = FetchPolicy()
    host: str
    port: int

    def _new_conn(self) -> socket.socket:  # type: ignore[misc]
        reason = None if _local_allowed(self.policy, self.host, self.port) else address_refusal(self.host)
        if reason:
            raise FetchError("blocked_address", f"refusing to connect to {self.host}: {reason}")
        return super()._new_conn()  # type: ignore[misc]


class _GuardedHTTPConnection(_GuardMixin, HTTPConnection):
    pass


class _GuardedHTTPSConnection(_GuardMixin, HTTPSConnection):
    pass


def _sniff(head: bytes) -> str | None:
    """Allowed type by content, or None for anything else (images, archives, binaries)."""
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n\x0c")
    if stripped.startswith(b"%PDF-"):
        return PDF
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 BOM: text, decoded by the extractor
        low16 = head[2:4096].replace(b"\x00", b"").lower()
        return HTML if b"<html" in low16 or b"<!doctype html" in low16 else TEXT
    low = stripped[:4096].lower()
    if low.startswith(b"<") and any(
        marker in low
        for marker in (
            b"<!doctype html",
            b"<html",
            b"<head",
            b"<body",
            b"<title",
            b"<meta",
            b"<div",
            b"<p",
            b"<script",
            b"<!--",
            b"<?xml",
        )
    ):
        return HTML
    sample = head[:4096]
    if b"\x00" in sample:
        return None
    controls = sum(1 for byte in sample if byte < 0x20 and byte not in (9, 10, 12, 13, 27))
    if sample and controls / len(sample) > 0.01:
        return None
    return TEXT if sample.strip() else None


def _decide_type(declared: str, sniffed: str | None, url: str) -> str:
    if sniffed is None:
        raise FetchError(
            "unsupported_type", f"content is not HTML, text or PDF (declared {declared or 'nothing'})", url=url
        )
    if declared == "application/pdf" and sniffed != PDF:
        raise FetchError("unsupported_type", "declared PDF but the body is not a PDF", url=url)
    return sniffed


def _parse_content_type(value: str) -> tuple[str, str | None]:
    mime, _, params = value.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, val = param.strip().partition("=")
        if key.lower() == "charset" and val:
            charset = val.strip().strip("'\"").lower() or None
    return mime.strip().lower(), charset


def _pool(
    target: _Target, ip: str, policy: FetchPolicy, timeout: urllib3.Timeout
) -> urllib3.connectionpool.HTTPConnectionPool:
    if target.scheme == "https":
        conn_cls = type("Conn", (_GuardedHTTPSConnection,), {"policy": policy})
        https_pool = HTTPSConnectionPool(
            ip,
            port=target.port,
            timeout=timeout,
            retries=False,
            maxsize=1,
            server_hostname=target.host,
            assert_hostname=target.host,
            cert_reqs="CERT_REQUIRED",
            ca_certs=policy.ca_certs,
        )
        https_pool.ConnectionCls = conn_cls
        return https_pool
    conn_cls = type("Conn", (_GuardedHTTPConnection,), {"policy": policy})
    http_pool = HTTPConnectionPool(ip, port=target.port, timeout=timeout, retries=False, maxsize=1)
    http_pool.ConnectionCls = conn_cls
    return http_pool


def _remaining(deadline: float, url: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise FetchError("timeout", "total deadline exceeded", url=url)
    return left


def _read_body(
    response: urllib3.BaseHTTPResponse, policy: FetchPolicy, deadline: float, url: str, declared: str
) -> tuple[bytes, str]:
    chunks: list[bytes] = []
    size = 0
    sniffed_type: str | None = None
    head = b""
    while True:
        left = _remaining(deadline, url)
        sock = getattr(getattr(response, "connection", None), "sock", None)
        if sock is not None:
            # Each blocking read is bounded by what is left of the total deadline (slow drip).
            sock.settimeout(left)
        try:
            chunk = response.read1(65536)
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError) as exc:
            raise FetchError("timeout", "total deadline exceeded while reading", url=url) from exc
        except urllib3.exceptions.DecodeError as exc:
            raise FetchError("connection_error", f"bad content encoding: {exc}", url=url) from exc
        except (urllib3.exceptions.ProtocolError, OSError) as exc:
            raise FetchError("connection_error", f"connection broken: {exc}", url=url) from exc
        if not chunk:
            break
        size += len(chunk)
        if size > policy.max_bytes:
            raise FetchError("too_large", f"body exceeds {policy.max_bytes} bytes", url=url)
        chunks.append(chunk)
        if sniffed_type is None and size >= 1024:
            head = b"".join(chunks)
            sniffed_type = _decide_type(declared, _sniff(head), url)  # abort binaries early
    _remaining(deadline, url)
    body = b"".join(chunks)
    if sniffed_type is None:
        sniffed_type = _decide_type(declared, _sniff(body), url)
    return body, sniffed_type


def fetch(url: str, policy: FetchPolicy | None = None) -> FetchResult:
    """Fetch one user-supplied URL under the policy, or raise FetchError with an error_code."""
    policy = policy or FetchPolicy()
    started = time.monotonic()
    deadline = started + policy.total_timeout
    current = url.strip()
    redirects: list[str] = []
    while True:
        target = _parse(current, policy)
        ip = _resolve(target, policy, deadline, current)
        left = _remaining(deadline, current)
        timeout = urllib3.Timeout(connect=min(policy.connect_timeout, left), read=left)
        headers = {
            "Host": target.host_header,
            "User-Agent": policy.user_agent,
            "Accept": "text/html,application/xhtml+xml,application/pdf;q=0.9,text/plain;q=0.8",
            "Accept-Encoding": "gzip, deflate",
        }
        if policy.proxy_url:
            manager: urllib3.PoolManager = urllib3.ProxyManager(policy.proxy_url, timeout=timeout, retries=False)
            pool = manager.connection_from_url(current)
        else:
            pool = _pool(target, ip, policy, timeout)
        try:
            try:
                response = pool.urlopen(
                    "GET", target.request_target, headers=headers, redirect=False, retries=False,
                    preload_content=False, decode_content=True, assert_same_host=False,
                )  # fmt: skip
            except FetchError as exc:
                exc.url = exc.url or current
                raise
            except urllib3.exceptions.NewConnectionError as exc:  # subclasses ConnectTimeoutError
                raise FetchError("connection_error", f"cannot connect: {exc}", url=current) from exc
            except urllib3.exceptions.TimeoutError as exc:
                raise FetchError("timeout", f"timed out connecting or waiting: {exc}", url=current) from exc
            except urllib3.exceptions.SSLError as exc:
                raise FetchError("tls_error", f"TLS failure: {exc}", url=current) from exc
            except urllib3.exceptions.HTTPError as exc:
                raise FetchError("connection_error", f"cannot connect: {exc}", url=current) from exc
            try:
                status = response.status
                if status in _REDIRECTS and response.headers.get("Location"):
                    if len(redirects) >= policy.max_redirects:
                        raise FetchError(
                            "too_many_redirects", f"more than {policy.max_redirects} redirects", url=current
                        )
                    redirects.append(current)
                    current = urljoin(current, response.headers["Location"].strip())
                    continue
                if status < 200 or status >= 300:
                    raise FetchError("http_error", f"HTTP status {status}", url=current, status=status)
                declared, charset = _parse_content_type(response.headers.get("Content-Type", ""))
                if declared not in _DECLARED_OK and declared not in _DECLARED_GENERIC:
                    raise FetchError(
                        "unsupported_type", f"content type {declared!r} is not HTML, text or PDF", url=current
                    )
                length = response.headers.get("Content-Length", "")
                if length.strip().isdigit() and int(length) > policy.max_bytes:
                    raise FetchError(
                        "too_large", f"Content-Length {length} exceeds {policy.max_bytes} bytes", url=current
                    )
                body, content_type = _read_body(response, policy, deadline, current, declared)
            finally:
                response.release_conn()
                response.close()
        finally:
            pool.close()
        return FetchResult(
            url=url,
            final_url=current,
            status=status,
            content_type=content_type,
            declared_content_type=declared,
            charset=charset,
            body=body,
            redirects=redirects,
            peer_ip=ip,
            elapsed_ms=int((time.monotonic() - started) * 1000),
        )
