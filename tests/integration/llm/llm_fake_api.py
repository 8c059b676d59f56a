"""A small local HTTP server that speaks Anthropic's Messages API and OpenAI's Chat Completions API.

Nothing local serves the Messages API for real, so the official ``anthropic`` client is tested
against this server; the ``openai`` client too, for what ``transformers serve`` cannot show (429s,
5xx, keys). It answers 1-hop prompts correctly with its own small solver (independent of possym),
and can be told to fail: a per-prompt schedule of statuses or slow replies before success, a
permanent status for some prompts, or a delay on every request. It records what it received.

Use it as a context manager: ``with FakeAPI(...) as api:`` serves from a thread on a free port.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SEQUENCE = re.compile(r'Input: "([^"]*)"\s*Output:\s*$')


def answer(prompt: str) -> str:
    """The right reply to a 1-hop prompt (written afresh here, not imported from possym)."""
    match = SEQUENCE.search(prompt)
    if match is None:
        return "I cannot find the sequence."
    *window, query = match.group(1).split()
    if query.isdigit():
        return window[-int(query)]
    return next(tok for tok in window if tok.startswith(query[1]))


def prompt_id(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()


class FakeAPI:
    """Local Messages + Chat Completions server.

    schedule: what the first attempts at each prompt get before the answer, e.g. [429, 500] or
        [429, "slow"] ("slow" sleeps ``slow_s`` and then answers, so a client time-out fires).
    permanent: prompt -> HTTP status to return on every attempt, or None.
    delay_s: added to every request.
    reply: prompt -> reply text (default: the correct answer).
    echo_key_in_errors: put the received key into error messages, as some APIs do with a prefix.
    """

    def __init__(
        self,
        *,
        schedule: list[int | str] | None = None,
        permanent: Callable[[str], int | None] | None = None,
        delay_s: float = 0.0,
        slow_s: float = 2.0,
        reply: Callable[[str], str] = answer,
        echo_key_in_errors: bool = False,
    ) -> None:
        self.schedule = list(schedule or [])
        self.permanent = permanent or (lambda prompt: None)
        self.delay_s = delay_s
        self.slow_s = slow_s
        self.reply = reply
        self.echo_key_in_errors = echo_key_in_errors
        self.lock = threading.Lock()
        self.requests: list[dict] = []  # path, body, key
        self.attempts: dict[str, int] = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeAPI:
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def count(self, path: str | None = None) -> int:
        with self.lock:
            return sum(1 for r in self.requests if path is None or r["path"] == path)

    def _decide(self, prompt: str) -> int | str | None:
        status = self.permanent(prompt)
        if status is not None:
            return status
        with self.lock:
            n = self.attempts.get(prompt_id(prompt), 0)
            self.attempts[prompt_id(prompt)] = n + 1
        return self.schedule[n] if n < len(self.schedule) else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self._send(200, {"object": "list", "data": []})

            def do_POST(self) -> None:  # noqa: N802
                size = int(self.headers.get("content-length", 0))
                raw = self.rfile.read(size)
                if len(raw) < size:  # the client died mid-request (kill -9): it never sent this one, so not counted
                    return
                body = json.loads(raw or b"{}")
                anthropic = self.path.rstrip("/").endswith("/messages")
                # Anthropic's client sends x-api-key or, in recent versions, a bearer token; OpenAI's a bearer token.
                bearer = self.headers.get("authorization", "").removeprefix("Bearer ").strip()
                key = self.headers.get("x-api-key") or bearer or None
                with api.lock:
                    api.requests.append({"path": self.path, "body": body, "key": key})
                if api.delay_s:
                    time.sleep(api.delay_s)
                if not key:
                    self._error(anthropic, 401, "missing API key")
                    return
                content = body["messages"][-1]["content"]
                prompt = content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
                action = api._decide(prompt)
                if isinstance(action, int):
                    detail = f"simulated {action}" + (f" for key {key}" if api.echo_key_in_errors else "")
                    self._error(anthropic, action, detail)
                    return
                if action == "slow":
                    time.sleep(api.slow_s)
                text = api.reply(prompt)
                model = body.get("model", "fake")
                if anthropic:
                    self._send(200, {
                        "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                        "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
                    })  # fmt: skip
                else:
                    self._send(200, {
                        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    })  # fmt: skip

            def _error(self, anthropic: bool, status: int, message: str) -> None:
                kind = {401: "authentication_error", 429: "rate_limit_error", 400: "invalid_request_error"}
                payload = (
                    {"type": "error", "error": {"type": kind.get(status, "api_error"), "message": message}}
                    if anthropic
                    else {"error": {"message": message, "type": kind.get(status, "server_error"), "code": None}}
                )
                self._send(status, payload, {"retry-after": "0"} if status == 429 else None)

        return Handler
