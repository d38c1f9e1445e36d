"""A stand-in for the Hugging Face Hub on 127.0.0.1, for the opt-in `--hub` tests.

It serves `/<org>/<name>/resolve/<revision>/config.json` (HEAD and GET) with the headers
huggingface_hub reads (X-Repo-Commit, ETag, Content-Length), `/api/models/<org>/<name>` (the
model info the catalog refresh reads: `sha` and `safetensors.total`, when `params` gives the
repository's count), answers 404 for any other file, and
401 when a token is required and missing. Every request is recorded, so a test can check that
only config.json was asked for. It listens on loopback only and stops with the test.
"""
from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    def __init__(self, repos: dict, token: str | None = None, params: dict | None = None):
        self.repos = {k: json.dumps(v, indent=2).encode() for k, v in repos.items()}
        self.info = {k: json.dumps({"id": k, "sha": COMMIT, "safetensors": {
            "parameters": {"BF16": n}, "total": n}}).encode() for k, n in (params or {}).items()}
        self.token = token
        self.requests: list = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _answer(self, body: bool) -> None:
                hub.requests.append((self.command, self.path, self.headers.get("Authorization")))
                if hub.token and self.headers.get("Authorization") != f"Bearer {hub.token}":
                    self.send_response(401)
                    self.send_header("X-Error-Code", "GatedRepo")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                parts = self.path.split("?")[0].strip("/").split("/")
                if len(parts) >= 5 and parts[2] == "resolve":
                    repo, filename = "/".join(parts[:2]), "/".join(parts[4:])
                    data = hub.repos.get(repo) if filename == "config.json" else None
                elif len(parts) == 4 and parts[:2] == ["api", "models"]:
                    data = hub.info.get("/".join(parts[2:]))
                else:
                    data = None
                if data is None:
                    self.send_response(404)
                    self.send_header("X-Error-Code", "EntryNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", '"' + hashlib.sha1(data).hexdigest() + '"')
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def do_HEAD(self):  # noqa: N802
                self._answer(False)

            def do_GET(self):  # noqa: N802
                self._answer(True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeHub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
