"""A small fault-injecting HTTP proxy for tests and benchmarks: it sits between a client and a real
OpenAI-compatible server on 127.0.0.1, forwards requests, and on the attempts it is told to, answers
429 with Retry-After, 500, hangs past the client's timeout, drops the connection, returns malformed
JSON, answers 400 quoting the request's Authorization header, or 200 with the key inside the completion
(to prove a client never records it), drips a 200 answer one byte at a time (to prove a timeout is a
wall-clock limit), or answers with a completion of `bloat` bytes (to prove a cap on bytes read).
It can also add a fixed latency to every request. It logs every request it sees.

Requests are told apart by the `X-FSB-Request-Id` header that `fsb generate` sends (else by a hash of
the body), so a fault plan can say "the first attempt of each request fails, each with the next fault
of this cycle", whatever order concurrent requests arrive in.

    with FaultProxy(upstream, faults=first_attempts(["429", "500", "hang", "drop", "malformed"])) as proxy:
        ... client at proxy.url ...
    proxy.log  # [Entry(request_id, attempt, fault, status, t), ...]

Binds 127.0.0.1 only; stops when the `with` block ends, or by itself after `lifetime` seconds.
Run as a script (`python tests/_proxy.py UPSTREAM --latency 0.5`) it serves until killed or its lifetime ends.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.client
import http.server
import json
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

FAULTS = ("429", "500", "hang", "drop", "malformed", "echo_auth", "echo_key_ok", "echo_key_disguised", "drip", "bloat", "401")
FaultPlan = Callable[[str, int], str | None]


@dataclass
class Entry:
    """One request the proxy saw (logged on arrival): which request, which attempt, the fault applied, the status sent."""

    request_id: str
    attempt: int
    fault: str | None
    status: int | None
    t: float  # time.monotonic() on arrival
    path: str
    body: bytes = b""


def first_attempts(cycle: Sequence[str], every: int = 1, twice: int = 0) -> FaultPlan:
    """Every `every`-th distinct request fails its first attempt with the next fault of `cycle`;
    every `twice`-th of those fails its second attempt too (with the fault after that)."""
    order: dict[str, int] = {}
    lock = threading.Lock()

    def plan(request_id: str, attempt: int) -> str | None:
        with lock:
            n = order.setdefault(request_id, len(order))
        if n % every:
            return None
        k = n // every
        if attempt == 1:
            return cycle[k % len(cycle)]
        if attempt == 2 and twice and k % twice == 0:
            return cycle[(k + 1) % len(cycle)]
        return None

    return plan


def always(fault: str | None, only: Callable[[str], bool] | None = None) -> FaultPlan:
    """The same fault on every attempt (of the requests `only` accepts, else all)."""
    return lambda request_id, attempt: fault if only is None or only(request_id) else None


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:
        self.server.proxy._handle(self)

    def do_POST(self) -> None:
        self.server.proxy._handle(self)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # the default 5 drops connections when many clients connect at once
    proxy: FaultProxy

    def process_request(self, request: socket.socket, client_address: object) -> None:
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small answers go out at once
        super().process_request(request, client_address)


class FaultProxy:
    """Forward to `upstream` (http://127.0.0.1:PORT, with or without /v1), injecting faults per `faults`."""

    def __init__(
        self,
        upstream: str,
        faults: FaultPlan | None = None,
        *,
        latency: float = 0.0,
        hang: float = 60.0,
        retry_after: str = "1",
        lifetime: float = 900.0,
        drip: float = 0.5,
        bloat: int = 20_000_000,
    ):
        parts = urlsplit(upstream)
        if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the proxy only forwards to a server on this machine")
        self.upstream = (parts.hostname, parts.port or 80)
        self.faults = faults or (lambda request_id, attempt: None)
        self.latency = latency
        self.hang = hang
        self.retry_after = retry_after
        self.drip = drip  # seconds between the bytes of a "drip" answer
        self.bloat = bloat  # characters of a "bloat" answer's completion
        self.lifetime = lifetime
        self.log: list[Entry] = []
        self.authorization: list[str] = []
        self._attempts: dict[str, int] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None
        self._gate = threading.Event()
        self._gate.set()
        self._hold_after: int | None = None
        self._posts = 0

    def hold_after(self, n: int) -> None:
        """Let the next `n` POST requests through; hold every later one until `release()`, then drop it unanswered.

        Makes "kill the client midway" deterministic: exactly n requests can finish before the kill.
        """
        with self._lock:
            self._hold_after, self._posts = n, 0
            self._gate.clear()

    def release(self) -> None:
        """Let held requests (and every later one) through."""
        with self._lock:
            self._hold_after = None
        self._gate.set()

    @property
    def url(self) -> str:
        """The base URL for clients (…/v1)."""
        assert self._server is not None, "start the proxy first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FaultProxy:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.lifetime, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._gate.set()
        if self._timer is not None:
            self._timer.cancel()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def entries(self, fault: str | None = "any") -> list[Entry]:
        """Logged requests, all or those with one fault ("any": all; None: the ones passed through)."""
        with self._lock:
            return [e for e in self.log if fault == "any" or e.fault == fault]

    def reset(self) -> None:
        """Forget the log and the attempt counts (a new phase of a test)."""
        with self._lock:
            self.log.clear()
            self._attempts.clear()
            self.authorization.clear()
            self.max_in_flight = 0

    # --- handling ---------------------------------------------------------------------------------

    def _handle(self, h: _Handler) -> None:
        arrived = time.monotonic()
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        request_id = h.headers.get("X-FSB-Request-Id") or hashlib.sha256(body).hexdigest()
        with self._lock:
            attempt = self._attempts[request_id] = self._attempts.get(request_id, 0) + 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if h.headers.get("Authorization"):
                self.authorization.append(h.headers["Authorization"])
        fault = self.faults(request_id, attempt) if h.command == "POST" else None
        entry = Entry(request_id, attempt, fault, None, arrived, h.path, body)
        with self._lock:
            self.log.append(entry)
            self._posts += h.command == "POST"
            held = h.command == "POST" and self._hold_after is not None and self._posts > self._hold_after
        if held:  # never answered: wait for release(), then drop the connection
            self._gate.wait()
            with self._lock:
                self.in_flight -= 1
            self._drop(h)
            return
        status = None
        try:
            if self.latency:
                self._stop.wait(self.latency)
            if fault == "429":
                status = self._reply(
                    h,
                    429,
                    {"error": {"message": "rate limited by the test proxy", "type": "rate_limit"}},
                    {"Retry-After": self.retry_after},
                )
            elif fault == "500":
                status = self._reply(h, 500, {"error": {"message": "injected server error", "type": "server_error"}})
            elif fault == "401":
                status = self._reply(h, 401, {"error": {"message": "injected: invalid API key", "type": "invalid_request_error"}})
            elif fault == "echo_auth":
                auth = h.headers.get("Authorization", "")
                status = self._reply(
                    h, 400, {"error": {"message": f"bad request; you sent Authorization: {auth}", "type": "invalid_request_error"}}
                )
            elif fault == "echo_key_ok":  # a 200 whose completion quotes the key (a server or model echoing it)
                got, headers, payload = self._forward(h, body)
                key = h.headers.get("Authorization", "").removeprefix("Bearer ")
                doc = json.loads(payload)
                doc["choices"][0]["message"]["content"] = f"Your key is {key}, keep it.\nAgain: {key}"
                doc["id"] = f"chatcmpl-{key}"
                status = self._send(h, got, json.dumps(doc).encode(), headers)
            elif fault == "echo_key_disguised":  # a 200 quoting the key upper-cased, percent-encoded and \\u-escaped
                got, headers, payload = self._forward(h, body)
                key = h.headers.get("Authorization", "").removeprefix("Bearer ")
                doc = json.loads(payload)
                encoded = "".join(f"%{b:02X}" for b in key.encode())
                escaped = "".join(f"\\u{ord(c):04x}" for c in key)
                doc["choices"][0]["message"]["content"] = f"KEY {key.upper()} url {encoded} json {escaped} lower {key.lower()}"
                status = self._send(h, got, json.dumps(doc).encode(), headers)
            elif fault == "drip":  # a 200 whose body comes one byte every `drip` seconds, for minutes
                h.send_response(200)
                h.send_header("Content-Type", "application/json")
                h.send_header("Content-Length", "100000")
                h.end_headers()
                h.wfile.flush()
                status = 200
                while not self._stop.wait(self.drip):
                    h.wfile.write(b" ")
                    h.wfile.flush()
            elif fault == "bloat":  # a well-formed completion of `bloat` characters
                message = {"role": "assistant", "content": "x" * self.bloat}
                doc = {"id": "chatcmpl-bloat", "object": "chat.completion", "created": 1, "model": "bloat"}
                status = self._reply(h, 200, {**doc, "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})
            elif fault == "hang":
                self._forward(h, body)  # the server does the work; the answer never comes back in time
                self._stop.wait(self.hang)
                self._drop(h)
            elif fault == "drop":
                self._forward(h, body)
                self._drop(h)
            elif fault == "malformed":
                got, _, payload = self._forward(h, body)
                broken = payload[: max(1, len(payload) // 2)] + b"<!-- cut -->"
                status = self._send(h, got, broken, {"Content-Type": "application/json"})
            else:
                got, headers, payload = self._forward(h, body)
                status = self._send(h, got, payload, headers)
        except OSError:  # the client went away (timeouts, resets, broken pipes)
            h.close_connection = True
        finally:
            with self._lock:
                self.in_flight -= 1
                entry.status = status

    def _forward(self, h: _Handler, body: bytes) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(*self.upstream, timeout=300)
        try:
            headers = {k: v for k, v in h.headers.items() if k.lower() not in ("host", "connection", "content-length", "accept-encoding")}
            conn.request(h.command, h.path, body=body or None, headers=headers)
            r = conn.getresponse()
            payload = r.read()
            keep = {k: v for k, v in r.getheaders() if k.lower() in ("content-type", "x-request-id", "retry-after")}
            return r.status, keep, payload
        finally:
            conn.close()

    def _reply(self, h: _Handler, status: int, doc: object, headers: dict[str, str] | None = None) -> int:
        return self._send(h, status, json.dumps(doc).encode(), {"Content-Type": "application/json", **(headers or {})})

    def _send(self, h: _Handler, status: int, payload: bytes, headers: dict[str, str]) -> int:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(payload)))
        h._headers_buffer.append(b"\r\n")  # end the headers and send them with the body in one write
        h.wfile.write(b"".join(h._headers_buffer) + payload)
        h._headers_buffer = []
        h.wfile.flush()
        return status

    def _drop(self, h: _Handler) -> None:
        h.close_connection = True
        with contextlib.suppress(OSError):
            h.connection.shutdown(socket.SHUT_RDWR)


def main() -> None:
    """Serve a proxy with added latency (and optional faults) until killed or its lifetime ends."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("upstream", help="the real server, http://127.0.0.1:PORT[/v1]")
    p.add_argument("--latency", type=float, default=0.0)
    p.add_argument("--lifetime", type=float, default=900.0)
    args = p.parse_args()
    with FaultProxy(args.upstream, latency=args.latency, lifetime=args.lifetime) as proxy:
        print(proxy.url, flush=True)
        proxy._stop.wait(args.lifetime)


if __name__ == "__main__":
    main()
