"""A local server that replays recorded LLM API responses, for the real openai/anthropic SDKs.

Each fixture file ``fixtures/<scenario>.json`` holds ``{"provider", "description",
"responses": [{"status", "body", "headers"?}, ...]}``; the responses are served in order, one
per request, whatever the request. Every request is recorded (path, headers, JSON body).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
ROUTES = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


class RecordedServer:
    def __init__(self, provider: str, responses: list[dict[str, Any]]) -> None:
        self.provider = provider
        self.responses = list(responses)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(n)
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = raw.decode(errors="replace")
                with server._lock:
                    server.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                            "body": body})
                    if self.path != ROUTES[server.provider]:
                        resp = {"status": 404, "body": {"error": {"message": f"no route {self.path}"}}}
                    elif server.responses:
                        resp = server.responses.pop(0)
                    else:
                        resp = {"status": 500, "body": {"error": {"message": "no recorded response left"}}}
                data = json.dumps(resp.get("body", {})).encode()
                self.send_response(resp["status"])
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in resp.get("headers", {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "RecordedServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def user_text(self, i: int) -> str:
        """All message text of request ``i`` (system included)."""
        body = self.requests[i]["body"]
        parts = [m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
                 for m in body["messages"]]
        if isinstance(body.get("system"), str):
            parts.insert(0, body["system"])
        return "\n".join(parts)


def load_scenario(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


@pytest.fixture
def clean_llm_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No provider variables or proxies from the outside leak into a test."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "OPENAI_ADMIN_KEY",
                "OPENAI_CUSTOM_HEADERS", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL",
                "ANTHROPIC_PROFILE", "ANTHROPIC_CUSTOM_HEADERS", "ANTHROPIC_CONFIG_DIR",
                "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return monkeypatch


@pytest.fixture
def serve(clean_llm_env: pytest.MonkeyPatch) -> Any:
    """``serve(scenario)``: start the replay server and point the provider's SDK at it."""
    servers: list[RecordedServer] = []

    def start(name: str) -> RecordedServer:
        sc = load_scenario(name)
        srv = RecordedServer(sc["provider"], sc["responses"]).start()
        servers.append(srv)
        if sc["provider"] == "openai":
            clean_llm_env.setenv("OPENAI_BASE_URL", f"{srv.url}/v1")
            clean_llm_env.setenv("OPENAI_API_KEY", "test")
        else:
            clean_llm_env.setenv("ANTHROPIC_BASE_URL", srv.url)
            clean_llm_env.setenv("ANTHROPIC_API_KEY", "test")
        return srv

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def kernel() -> Callable[[str], str]:
    return lambda name: (FIXTURES / "kernels" / name).read_text()


@pytest.fixture
def verdict_text() -> Callable[[str], str]:
    return lambda name: (FIXTURES / "verdicts" / name).read_text()
