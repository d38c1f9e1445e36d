"""A minimal LSP client for tests: JSON-RPC over a subprocess's stdio, as an editor speaks it
(Content-Length framing), with every message kept as a transcript."""
from __future__ import annotations

import json
import queue
import subprocess
import threading
import time


class Client:
    def __init__(self, command: list, cwd: str, env: dict):
        self.process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.messages: queue.Queue = queue.Queue()
        self.transcript: list = []      # ("->" | "<-", message)
        self.next_id = 1
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            headers = {}
            while True:
                line = stream.readline()
                if not line:
                    return
                line = line.decode("ascii").strip()
                if not line:
                    break
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            body = stream.read(int(headers["content-length"]))
            message = json.loads(body)
            self.transcript.append(("<-", message))
            self.messages.put(message)

    def send(self, message: dict) -> None:
        self.transcript.append(("->", message))
        data = json.dumps(message).encode("utf-8")
        self.process.stdin.write(f"Content-Length: {len(data)}\r\n\r\n".encode("ascii") + data)
        self.process.stdin.flush()

    def notify(self, method: str, params: dict) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params, timeout: float = 120) -> dict:
        ident = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        reply = self.wait(lambda m: m.get("id") == ident and "method" not in m, timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result")

    def wait(self, wanted, timeout: float = 120) -> dict:
        """The next message (kept in order) for which wanted(message) holds."""
        deadline = time.monotonic() + timeout
        skipped = []
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no such message; got {skipped[-5:]}")
                message = self.messages.get(timeout=left)
                if wanted(message):
                    return message
                skipped.append(message)
        finally:
            for message in skipped:
                self.messages.put(message)

    def diagnostics(self, uri: str, timeout: float = 120, version=None) -> list:
        message = self.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                            and m["params"]["uri"] == uri
                            and (version is None or m["params"].get("version") == version),
                            timeout)
        return message["params"]["diagnostics"]

    def close(self, timeout: float = 30) -> int:
        try:
            self.request("shutdown", None, timeout)
            self.notify("exit", None)
            return self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
