#!/usr/bin/env python3
"""Observe how an MCP Streamable HTTP server behaves on resumption (stdlib only).

    python3 interop/observe.py URL [--version 2025-11-25] [--size BYTES]
    python3 interop/observe.py URL --cross-session

Opens a session, calls `big_result` and cuts its own connection in the middle of the result
event, then resumes with `Last-Event-ID` (the last complete event's id); calls `progress` (with a
delay between notifications) and cuts at an event boundary, then resumes; finally resumes with an
id the server never sent. Prints what came back each time: status, the events (id, size, first
bytes), and whether the replay continued strictly after the id. The table in interop/README.md was
written from its output.

`--cross-session`: two sessions whose first calls both have JSON-RPC id 1; session A is cut after
its priming event while session B's call completes; A resumes and the script shows whether B's
response came back on A's stream (it does with `py/server.py --shared-store`).
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import time
import urllib.parse


class Session:
    def __init__(self, url: str, version: str) -> None:
        self.url = urllib.parse.urlsplit(url)
        self.version = version
        self.session_id: str | None = None
        self.negotiated: str | None = None
        self.next_id = 1

    def conn(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=30)

    def headers(self) -> dict[str, str]:
        h = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if self.session_id:
            h["mcp-session-id"] = self.session_id
        if self.negotiated:
            h["mcp-protocol-version"] = self.negotiated
        return h

    def post(self, body: dict) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        c = self.conn()
        c.request("POST", self.url.path, json.dumps(body), self.headers())
        return c, c.getresponse()

    def initialize(self) -> list[dict]:
        c, r = self.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": self.version,
                    "capabilities": {},
                    "clientInfo": {"name": "observe", "version": "0"},
                },
            }
        )
        self.session_id = r.getheader("mcp-session-id")
        events = parse(r.read())
        c.close()
        for e in events:
            if e["data"]:
                self.negotiated = json.loads(e["data"])["result"]["protocolVersion"]
        c, r = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        r.read()
        c.close()
        return events

    def call(self, tool: str, arguments: dict, progress: bool = False):
        rid = self.next_id
        self.next_id += 1
        params: dict = {"name": tool, "arguments": arguments}
        if progress:
            params["_meta"] = {"progressToken": f"p{rid}"}
        return self.post({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})

    def resume(self, last_event_id: str, read_for: float = 3.0) -> tuple[int, dict, bytes]:
        c = self.conn()
        h = self.headers()
        h["accept"] = "text/event-stream"
        h["last-event-id"] = last_event_id
        c.request("GET", self.url.path, headers=h)
        r = c.getresponse()
        c.sock.settimeout(read_for)
        body = b""
        ending = "closed"
        try:
            while True:
                chunk = r.read1(65536)
                if not chunk:
                    break
                body += chunk
        except TimeoutError:
            ending = f"held open {read_for:.0f} s"
        except OSError as e:
            ending = f"failed: {e}"
        c.close()
        headers = dict((k.lower(), v) for k, v in r.getheaders())
        headers["ending"] = ending
        return r.status, headers, body


def parse(raw: bytes) -> list[dict]:
    """Complete events only (a cut tail is returned as {'partial': bytes})."""
    text = raw.replace(b"\r\n", b"\n")
    blocks = text.split(b"\n\n")
    out = []
    for block in blocks[:-1]:
        ev: dict = {"id": None, "data": "", "event": None, "retry": None, "comment": False}
        lines = block.split(b"\n")
        datas = []
        for line in lines:
            if line.startswith(b":"):
                ev["comment"] = True
                continue
            name, _, value = line.partition(b":")
            value = value[1:] if value.startswith(b" ") else value
            if name == b"id":
                ev["id"] = value.decode()
            elif name == b"data":
                datas.append(value.decode())
            elif name == b"event":
                ev["event"] = value.decode()
            elif name == b"retry":
                ev["retry"] = int(value)
        ev["data"] = "\n".join(datas)
        out.append(ev)
    if blocks[-1]:
        out.append({"partial": blocks[-1]})
    return out


def show(events: list[dict]) -> str:
    parts = []
    for e in events:
        if "partial" in e:
            parts.append(f"<cut: {len(e['partial'])} bytes of an event>")
        elif e["comment"] and e["id"] is None and not e["data"]:
            parts.append("<comment>")
        elif not e["data"]:
            parts.append(f"priming(id={e['id']}, retry={e['retry']})")
        else:
            try:
                m = json.loads(e["data"])
                kind = m.get("method") or ("result" if "result" in m else "error")
            except ValueError:
                kind = "?"
            parts.append(f"{kind}(id={e['id']}, {len(e['data'])} B)")
    return ", ".join(parts)


def read_until(r: http.client.HTTPResponse, pred, limit: int) -> bytes:
    buf = b""
    while len(buf) < limit and not pred(buf):
        chunk = r.read1(min(65536, limit - len(buf)))
        if not chunk:
            break
        buf += chunk
    return buf


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--version", default="2025-11-25")
    p.add_argument("--size", type=int, default=1 << 20)
    p.add_argument("--cross-session", action="store_true")
    a = p.parse_args()

    if a.cross_session:
        return cross_session(a.url, a.version)

    s = Session(a.url, a.version)
    init = s.initialize()
    print(f"offered {a.version}, negotiated {s.negotiated}, session {s.session_id!r}")
    print(f"initialize answer: {show(init)}")

    # 1. mid-event cut in the big result
    c, r = s.call("big_result", {"size": a.size})
    got = read_until(r, lambda b: b.count(b"\n\n") >= 1 and len(b) > 4096 + b.find(b"\n\n"), a.size // 2)
    c.close()
    evs = parse(got)
    print(f"mid-event cut: first connection brought {show(evs)}")
    ids = [e["id"] for e in evs if "partial" not in e and e["id"]]
    if not ids:
        print("  no complete event with an id before the cut: nothing to resume from")
    else:
        time.sleep(0.3)
        status, headers, body = s.resume(ids[-1])
        print(f"  resume after {ids[-1]}: {status} {headers.get('content-type')}, {headers['ending']}: {show(parse(body))}")
        if status == 200:
            done = [e for e in parse(body) if "partial" not in e and e["data"]]
            if done:
                text = json.loads(done[0]["data"])["result"]["content"][0]["text"]
                print(f"  result text {len(text)} bytes, intact: {len(text) == a.size}")

    # 2. boundary cut in a progress stream
    c, r = s.call("progress", {"count": 6, "delay_ms": 150}, progress=True)
    got = read_until(r, lambda b: b.count(b"notifications/progress") >= 2 and b.replace(b"\r", b"").endswith(b"\n\n"), 1 << 20)
    c.close()
    evs = parse(got)
    print(f"boundary cut: first connection brought {show(evs)}")
    ids = [e["id"] for e in evs if "partial" not in e and e["id"]]
    time.sleep(1.2)
    if ids:
        status, headers, body = s.resume(ids[-1])
        print(f"  resume after {ids[-1]}: {status}, {headers['ending']}: {show(parse(body))}")

    # 3. an id the server never sent
    status, headers, body = s.resume("never-sent-0", read_for=2.0)
    print(f"unknown id: {status} {headers.get('content-type')}, {headers['ending']}: {show(parse(body)) or body[:200]!r}")
    return 0


def cross_session(url: str, version: str) -> int:
    a = Session(url, version)
    a.initialize()
    b = Session(url, version)
    b.initialize()
    c, r = a.call("progress", {"count": 3, "delay_ms": 300})
    got = read_until(r, lambda x: x.replace(b"\r", b"").count(b"\n\n") >= 1, 1 << 20)
    c.close()
    evs = parse(got)
    print(f"A (id 1, progress) cut after: {show(evs)}")
    c, r = b.call("echo", {"text": "this is B's answer"})
    print(f"B (id 1, echo): {show(parse(r.read()))}")
    c.close()
    time.sleep(1.5)
    status, headers, body = a.resume(evs[0]["id"], read_for=1.5)
    print(f"A resumes: {status}, {headers['ending']}: {show(parse(body))}")
    foreign = False
    for e in parse(body):
        if "partial" not in e and e["data"]:
            print(f"    {e['data'][:160]}")
            foreign |= "B's answer" in e["data"]
    print("B's response reached A's stream" if foreign else "A's stream carried only A's events")
    return 1 if foreign else 0


if __name__ == "__main__":
    sys.exit(main())
