"""A hostile OpenAI-compatible (and Hub-like) server on 127.0.0.1 that echoes the caller's credentials back.

Chat completions (POST .../chat/completions) answer 200 with a completion whose text quotes the bearer
key in the encoding the request's model names (``echo:b64``, ``echo:html``, ``echo:zw``...; see `ENCODINGS`),
in the response id and in the refusal too. ``usage:absurd`` instead answers with absurd token counts
(1e30 prompt tokens, -5 completion tokens). ``status:400`` answers 400 with the key base64-encoded in the
error message. Any other request (a Hub API call) is answered `other_status` (default 500) with an error
quoting the bearer token base64-encoded and the request's URL with its query (a 429 says Retry-After: 0,
so a client's retries are quick). Every request is recorded.

    with EchoServer() as server:
        ... client at server.url + "/v1" ...
    server.requests  # [(method, path, authorization), ...]

Run as a script (`python tests/_echo_server.py`) it prints its URL and serves until killed (used to
reproduce the leaks by hand).
"""

from __future__ import annotations

import base64
import html
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ENCODINGS", "EchoServer"]


def _zw(key: str) -> str:
    return "\u200b".join(key[: len(key) // 2]) + "\u00ad" + "\u2060".join(key[len(key) // 2 :])


def _b64_in_blob(key: str) -> str:
    return base64.b64encode(b'{"user": "me", "key": "' + key.encode() + b'"}').decode()


ENCODINGS: dict[str, Callable[[str], str]] = {
    "b64": lambda k: base64.b64encode(k.encode()).decode(),
    "b64url": lambda k: base64.urlsafe_b64encode(k.encode()).decode().rstrip("="),
    "b64blob": _b64_in_blob,  # the key inside a longer base64 blob, at a byte offset that is not 0
    "html": lambda k: "".join(f"&#{ord(c)};" for c in k),
    "htmlhex": lambda k: "".join(f"&#x{ord(c):X};" for c in k),
    "htmlnamed": lambda k: html.escape(k).replace("-", "&#45").replace("_", "&lowbar;").replace(".", "&period;"),
    "zw": _zw,
    "hex": lambda k: k.encode().hex(),
    "json": lambda k: json.dumps(k).strip('"').replace("-", "\\u002D"),
    "pct2": lambda k: "".join(f"%25{b:02X}" for b in k.encode()),
}


class _Handler(BaseHTTPRequestHandler):
    server_ref: EchoServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, doc: Any) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if status == 429:
            self.send_header("Retry-After", "0")
        self.end_headers()
        self.wfile.write(body)

    def _key(self) -> str:
        return self.headers.get("Authorization", "").removeprefix("Bearer ").strip()

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        key = self._key()
        self.server_ref.requests.append((self.command, self.path, self.headers.get("Authorization", "")))
        if self.command == "POST" and self.path.split("?")[0].endswith("/chat/completions"):
            return self._completion(json.loads(body or b"{}"), key)
        secret = base64.b64encode(key.encode()).decode()
        self._send(self.server_ref.other_status, {"error": f"bad token {secret} for http://127.0.0.1{self.path}"})

    def _completion(self, request: dict[str, Any], key: str) -> None:
        model = str(request.get("model", ""))
        if model == "status:400":
            return self._send(400, {"error": {"message": f"invalid key {base64.b64encode(key.encode()).decode()}"}})
        usage: dict[str, Any] = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
        text = "A fine sentence."
        if model == "usage:absurd":
            usage = {"prompt_tokens": 1e30, "completion_tokens": -5, "total_tokens": 1e30}
        elif model.startswith("echo:"):
            text = f"Your key: {ENCODINGS[model.removeprefix('echo:')](key)} (keep it)"
        doc = {
            "id": f"chatcmpl-{ENCODINGS['b64'](key)}",
            "object": "chat.completion",
            "created": 1700000000,
            "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": usage,
        }
        self._send(200, doc)

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _serve


class EchoServer:
    """The hostile server, on a free port of 127.0.0.1, for the length of a `with` block."""

    def __init__(self, other_status: int = 500):
        self.other_status = other_status
        self.requests: list[tuple[str, str, str]] = []

    def __enter__(self) -> EchoServer:
        handler = type("Handler", (_Handler,), {"server_ref": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT (no trailing slash)."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"


if __name__ == "__main__":  # pragma: no cover - a manual reproduction aid
    import sys
    import time

    with EchoServer(int(sys.argv[1]) if len(sys.argv) > 1 else 500) as s:
        print(s.url, flush=True)
        while True:
            time.sleep(3600)
