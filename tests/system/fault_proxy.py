"""A small fault-injecting HTTP proxy for system tests: forwards every request to ``upstream``
(e.g. SeaweedFS's S3 endpoint) unchanged (Host header included, so SigV4 signatures still verify),
or, while :meth:`FaultProxy.fail_with` is set, answers it with that HTTP status and an S3 XML error
body without forwarding it. Every request is recorded as (method, path) in :attr:`FaultProxy.seen`.
A real server on a free 127.0.0.1 port (no mocks): the client under test talks HTTP to it.
"""

from __future__ import annotations

import http.client
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

S3_CODES = {500: "InternalError", 503: "SlowDown", 403: "AccessDenied", 400: "InvalidRequest"}
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


class FaultProxy:
    """The proxy (see the module docstring); ``url`` is its address once :meth:`start` ran."""

    def __init__(self, upstream: str):
        u = urllib.parse.urlparse(upstream)
        self.upstream = (u.hostname or "127.0.0.1", u.port or 80)
        self.status = 0
        self.seen: list[tuple[str, str]] = []
        self.faults = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _body(self) -> bytes:
                if self.headers.get("transfer-encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                n = int(self.headers.get("content-length") or 0)
                return self.rfile.read(n) if n else b""

            def _handle(self) -> None:
                body = self._body()
                with proxy._lock:
                    proxy.seen.append((self.command, self.path))
                    status = proxy.status
                if status:
                    proxy.faults += 1
                    code = S3_CODES.get(status, "InternalError")
                    err = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                           f"<Message>injected {status}</Message></Error>").encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(err)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(err)
                    return
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                if self.headers.get("transfer-encoding", "").lower() == "chunked":
                    headers["Content-Length"] = str(len(body))
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> FaultProxy:
        """Serve in a daemon thread."""
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def fail_with(self, status: int) -> None:
        """Answer every request with HTTP ``status`` (0: forward again)."""
        with self._lock:
            self.status = status

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
