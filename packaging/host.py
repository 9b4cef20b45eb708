#!/usr/bin/env python3
"""A stdio MCP host that checks an installed `ssegate` command end to end (stdlib only).

    packaging/host.py --kit SSEGATE_TESTKIT -- COMMAND [ARGS...]

Starts the test kit's loopback MCP server (`SSEGATE_TESTKIT serve --mode buffered --progress 3`, on
a free 127.0.0.1 port), then `COMMAND ARGS... bridge URL` as a host starts it (e.g.
`node_modules/.bin/ssegate`, `npx ssegate`, `venv/bin/ssegate`, `uvx ... ssegate`) and speaks MCP
over its stdin and stdout:

- `initialize` (2025-06-18): the server's version and name come back;
- a line that is not JSON: `-32700` with id null, and the bridge goes on;
- `tools/list`: `big_result` is listed;
- `big_result` of 4 MiB with a progress token: three progress notifications with the token, then
  the text intact (its SHA-256 equals the one the kit computes with `expected`);
- two calls in flight (300,000 and 200 bytes): each answered under its own id, intact;
- end of input: the command exits 0 within 5 seconds.

Prints one line per check and `host: PASS` at the end; exits 1 with `host: FAIL ...` on the first
failure (every wait is bounded: HOST_TIMEOUT seconds, default 60, per message). Both children are
stopped on the way out.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from typing import Any

TIMEOUT = float(os.environ.get("HOST_TIMEOUT", "60"))
BIG = 4 << 20


class Failure(Exception):
    pass


def check(condition: bool, what: str) -> None:
    if not condition:
        raise Failure(what)


class Kit:
    def __init__(self, binary: str) -> None:
        self.proc = subprocess.Popen(
            [binary, "serve", "--mode", "buffered", "--progress", "3", "--retry-ms", "5"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        hello = json.loads(self.readline())
        self.url: str = hello["url"]
        check(self.url.startswith("http://127.0.0.1:"), f"kit url {self.url}")

    def readline(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        check(bool(line), "the test kit ended")
        return line

    def command(self, line: str) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.readline())

    def expected_sha256(self, size: int, seed: int) -> str:
        answer = self.command(f"expected {size} {seed}")
        return str(answer["sha256"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.command("quit")
                self.proc.wait(5)
            except Exception:
                self.proc.kill()
                self.proc.wait()


class Bridge:
    def __init__(self, command: list[str], url: str) -> None:
        self.argv = [*command, "bridge", url]
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.messages: queue.Queue[Any] = queue.Queue()
        self.stderr = b""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.messages.put(json.loads(line))
            except ValueError:
                self.messages.put({"not-json": line[:200].decode("utf-8", "replace")})
        self.messages.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def recv(self) -> Any:
        try:
            message = self.messages.get(timeout=TIMEOUT)
        except queue.Empty:
            raise Failure(f"no message from the bridge within {TIMEOUT}s") from None
        check(message is not None, "the bridge closed its stdout")
        check("not-json" not in message, f"the bridge wrote a line that is not JSON: {message}")
        return message

    def until_response(self, id_: Any) -> tuple[Any, list[Any]]:
        """The response to `id_`, and the messages seen before it."""
        seen = []
        while True:
            message = self.recv()
            if "method" not in message and message.get("id") == id_:
                return message, seen
            seen.append(message)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def text_sha256(response: Any) -> str:
    check("result" in response, f"an error instead of a result: {str(response)[:300]}")
    text = response["result"]["content"][0]["text"]
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def big(id_: int, size: int, seed: int) -> Any:
    return {
        "jsonrpc": "2.0",
        "id": id_,
        "method": "tools/call",
        "params": {"name": "big_result", "arguments": {"size": size, "seed": seed}},
    }


def run(kit: Kit, bridge: Bridge) -> None:
    bridge.send(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "packaging-host", "version": "1"},
            },
        }
    )
    init, _ = bridge.until_response(0)
    check(init.get("result", {}).get("protocolVersion") == "2025-06-18", f"initialize: {init}")
    check(init["result"]["serverInfo"]["name"] == "ssegate-loopback", f"initialize: {init}")
    bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    print("host: initialize ok")

    bridge.send_raw(b'{"jsonrpc": "2.0", "id": 5, "method": \n')
    error = bridge.recv()
    check(error.get("id", "absent") is None and error.get("error", {}).get("code") == -32700, f"bad line: {error}")
    print("host: a line that is not JSON answered -32700")

    bridge.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": {}})
    tools, _ = bridge.until_response("list")
    names = [t["name"] for t in tools["result"]["tools"]]
    check("big_result" in names, f"tools/list: {names}")
    print(f"host: tools/list ok ({len(names)} tools)")

    call = big(7, BIG, 11)
    call["params"]["_meta"] = {"progressToken": "p7"}
    started = time.monotonic()
    bridge.send(call)
    response, seen = bridge.until_response(7)
    took = time.monotonic() - started
    progress = [m for m in seen if m.get("method") == "notifications/progress"]
    check(len(progress) == 3, f"{len(progress)} progress notifications, expected 3")
    check(all(p["params"]["progressToken"] == "p7" for p in progress), f"progress tokens: {progress}")
    check(text_sha256(response) == kit.expected_sha256(BIG, 11), "the 4 MiB result differs from the server's")
    print(f"host: 4 MiB result intact after 3 progress notifications ({took:.2f}s)")

    bridge.send(big(8, 300_000, 1))
    bridge.send(big(9, 200, 2))
    answered = {}
    while len(answered) < 2:
        message = bridge.recv()
        if "method" not in message:
            answered[message.get("id")] = message
    check(set(answered) == {8, 9}, f"answered ids {sorted(map(str, answered))}")
    check(text_sha256(answered[8]) == kit.expected_sha256(300_000, 1), "call 8's result differs")
    check(text_sha256(answered[9]) == kit.expected_sha256(200, 2), "call 9's result differs")
    print("host: two calls in flight, each answered intact")

    assert bridge.proc.stdin is not None
    bridge.proc.stdin.close()
    try:
        code = bridge.proc.wait(5)
    except subprocess.TimeoutExpired:
        raise Failure("the command did not exit within 5s of the end of its input") from None
    check(code == 0, f"exit status {code} at the end of input")
    print("host: end of input: exit 0")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kit", required=True, help="the ssegate-testkit binary")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    kit = Kit(args.kit)
    bridge = Bridge(command, kit.url)
    print(f"host: {' '.join(bridge.argv)}")
    try:
        run(kit, bridge)
    except Failure as failure:
        bridge.stop()
        time.sleep(0.1)
        stderr = bridge.stderr.decode("utf-8", "replace")[-2000:]
        print(f"host: FAIL {failure}\n--- the command's stderr (end) ---\n{stderr}", file=sys.stderr)
        return 1
    finally:
        bridge.stop()
        kit.stop()
    print("host: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
