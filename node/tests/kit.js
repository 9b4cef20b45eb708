// The Rust test kit and the official TypeScript SDK's server as child processes, for the
// `ssegate/mcp` tests (as python/tests/testkit.py does it for Python).
//
// - `Kit`: `ssegate-testkit serve --mode MODE [--proxy] [flags]`: the kit's loopback MCP server,
//   optionally behind its fault proxy, driven by one-line commands on its stdin (`cut N`, `cuts`,
//   `stats`, `expected SIZE SEED`, ...), each answered by one JSON line.
// - `SdkServer`: interop/ts/server.mjs (the official TS SDK's Streamable HTTP server) on a free
//   loopback port, ready once it prints `listening http://ADDR/mcp`.
//
// The binary: `$SSEGATE_TESTKIT`, else the debug build in `$CARGO_TARGET_DIR` or the repository's
// target/, built with `cargo build -p ssegate-testkit --bin ssegate-testkit` (once per process)
// when missing. A server that is not installed fails the test under `CI` and skips it loudly
// otherwise (`skipOrFail`). Every child is killed when the test process exits.
"use strict";

const { spawn, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");
const readline = require("node:readline");
const crypto = require("node:crypto");

const REPO = path.resolve(__dirname, "..", "..");
const COMMAND_TIMEOUT_MS = 120_000;
const START_TIMEOUT_MS = 60_000;
const live = new Set();
process.on("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

let binary = null;

/** The `ssegate-testkit` binary (built when missing). */
function testkitBinary() {
  if (binary !== null) return binary;
  if (process.env.SSEGATE_TESTKIT) {
    binary = process.env.SSEGATE_TESTKIT;
    if (!fs.existsSync(binary)) throw new Error(`SSEGATE_TESTKIT=${binary} is not a file`);
    return binary;
  }
  const target = process.env.CARGO_TARGET_DIR || path.join(REPO, "target");
  const built = spawnSync("cargo", ["build", "-p", "ssegate-testkit", "--bin", "ssegate-testkit"], {
    cwd: REPO,
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, CARGO_TARGET_DIR: target },
  });
  if (built.status !== 0) {
    throw new Error(`cargo build -p ssegate-testkit failed:\n${String(built.stderr).slice(-4000)}`);
  }
  binary = path.join(target, "debug", "ssegate-testkit");
  return binary;
}

/** A child's stdout as a queue of lines with timeouts. */
class Lines {
  constructor(stream) {
    this.queue = [];
    this.waiters = [];
    this.ended = false;
    readline.createInterface({ input: stream }).on("line", (line) => this.push(line));
    stream.on("end", () => {
      this.ended = true;
      this.push(null);
    });
  }

  push(line) {
    const waiter = this.waiters.shift();
    if (waiter) waiter(line);
    else this.queue.push(line);
  }

  next(timeoutMs, what) {
    if (this.queue.length) return Promise.resolve(this.queue.shift());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(done), 1);
        reject(new Error(`no line (${what}) within ${timeoutMs} ms`));
      }, timeoutMs);
      const done = (line) => {
        clearTimeout(timer);
        resolve(line);
      };
      this.waiters.push(done);
    });
  }
}

function flagArgs(flags) {
  const args = [];
  for (const [key, value] of Object.entries(flags)) {
    const name = "--" + key.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase()).replace(/_/g, "-");
    if (value === true) args.push(name);
    else if (value === false || value == null) continue;
    else args.push(name, String(value));
  }
  return args;
}

/** `ssegate-testkit serve`, running until `stop()`. */
class Kit {
  static async start(mode = "buffered", { proxy = false, ...flags } = {}) {
    const kit = new Kit();
    kit.args = ["serve", "--mode", mode, ...(proxy ? ["--proxy"] : []), ...flagArgs(flags)];
    kit.child = spawn(testkitBinary(), kit.args, { stdio: ["pipe", "pipe", "inherit"] });
    live.add(kit.child);
    kit.lines = new Lines(kit.child.stdout);
    kit.queue = Promise.resolve();
    const hello = await kit.read(START_TIMEOUT_MS, "its first line");
    kit.url = hello.url;
    kit.serverUrl = hello.server;
    kit.proxyUrl = hello.proxy;
    // With `auth: true`: issuer, metadata, protected, resource_metadata, redirect_uris.
    kit.auth = hello.auth ?? null;
    kit.cache = new Map();
    return kit;
  }

  async read(timeoutMs, what) {
    const line = await this.lines.next(timeoutMs, what);
    if (line === null) throw new Error(`ssegate-testkit ${this.args.join(" ")} exited before ${what}`);
    return JSON.parse(line);
  }

  /** Sends one command line; its JSON answer (`{error}` throws). Commands are serialized. */
  command(line) {
    const run = this.queue.then(async () => {
      this.child.stdin.write(line + "\n");
      const answer = await this.read(COMMAND_TIMEOUT_MS, JSON.stringify(line));
      if (answer.error !== undefined) throw new Error(`${line}: ${answer.error}`);
      return answer;
    });
    this.queue = run.catch(() => {});
    return run;
  }

  /** Arms one cut at byte `n` of the next connection's server-to-client bytes. */
  cut(n) {
    return this.command(`cut ${n}`);
  }

  async cuts() {
    return (await this.command("cuts")).cuts;
  }

  stats() {
    return this.command("stats");
  }

  /** The text big_result returns for `size` and `seed`, checked against the announced SHA-256. */
  async expectedText(size, seed) {
    const key = `${size} ${seed}`;
    if (!this.cache.has(key)) {
      const answer = await this.command(`expected ${size} ${seed}`);
      const data = fs.readFileSync(answer.path);
      const digest = crypto.createHash("sha256").update(data).digest("hex");
      if (digest !== answer.sha256) throw new Error(`${answer.path}: sha256 ${digest}, announced ${answer.sha256}`);
      this.cache.set(key, data.toString("utf8"));
    }
    return this.cache.get(key);
  }

  async stop() {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.child.once("exit", resolve));
    this.child.stdin.end("quit\n");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(timer);
    release(this.child);
  }
}

/** Forgets an exited child and closes its pipes (a pipe left open keeps the test process alive). */
function release(child) {
  live.delete(child);
  for (const stream of [child.stdin, child.stdout]) stream?.destroy();
}

/** Why the TS SDK's interop server cannot run here, or null. */
function sdkServerMissing() {
  const dir = path.join(REPO, "interop", "ts");
  if (!fs.existsSync(path.join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))) {
    return "interop/ts has no node_modules (run `interop/setup ts`)";
  }
  return null;
}

/** interop/ts/server.mjs on a free loopback port. */
class SdkServer {
  static async start(...flags) {
    const server = new SdkServer();
    const dir = path.join(REPO, "interop", "ts");
    server.child = spawn("node", [path.join(dir, "server.mjs"), ...flags, "--host", "127.0.0.1", "--port", "0"], {
      cwd: dir,
      stdio: ["ignore", "pipe", "inherit"],
    });
    live.add(server.child);
    const lines = new Lines(server.child.stdout);
    for (;;) {
      const line = await lines.next(START_TIMEOUT_MS, "listening");
      if (line === null) throw new Error("interop/ts/server.mjs exited before listening");
      const m = /^listening (\S+)/.exec(line);
      if (m) {
        server.url = m[1];
        return server;
      }
    }
  }

  async stop() {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.child.once("exit", resolve));
    this.child.kill("SIGTERM");
    await exited;
    release(this.child);
  }
}

/** Under `CI` a missing requirement fails the test; otherwise it is skipped, loudly. */
function skipOrFail(t, why) {
  if (process.env.CI !== undefined) throw new Error(`required under CI: ${why}`);
  process.stderr.write(`SKIPPED ${t.name}: ${why}\n`);
  t.skip(why);
}

/** The SDK interop servers' content: 16-byte blocks, each its own offset in 15 hex digits and `|`. */
function pattern(size) {
  const blocks = [];
  for (let offset = 0; offset < size + 16; offset += 16) blocks.push(offset.toString(16).padStart(15, "0") + "|");
  return blocks.join("").slice(0, size);
}

module.exports = { Kit, SdkServer, sdkServerMissing, skipOrFail, pattern, REPO };
