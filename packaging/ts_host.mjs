// What a TypeScript MCP client does with the installed package: `GuardedTransport` from
// "ssegate/mcp" under the official SDK's `Client` (both installed from their tarballs in the
// folder this file is copied into), against the official TypeScript SDK's server
// (interop/ts/server.mjs): a 4 MiB result intact; then through the test kit's fault proxy, which
// cuts the answer mid-event at several offsets: each call intact or the typed OutcomeUnknown,
// never torn, never a hang (each call has 60 s).
//
//   node ts_host.mjs REPO KIT      REPO: the checkout (for interop/ts); KIT: ssegate-testkit
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { GuardedTransport, typed, OutcomeUnknown } from "ssegate/mcp";

const [repo, kitBinary] = process.argv.slice(2);
const MIB = 1 << 20;
const children = [];
process.on("exit", () => children.forEach((c) => c.kill("SIGKILL")));

function pattern(size) {
  let out = "";
  for (let offset = 0; out.length < size; offset += 16) out += offset.toString(16).padStart(15, "0") + "|";
  return out.slice(0, size);
}

/** Starts `command`; resolves with [child, the first stdout line matching `re`'s first group]. */
function start(command, args, options, re) {
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"], ...options });
  children.push(child);
  const lines = createInterface({ input: child.stdout });
  return new Promise((resolve, reject) => {
    child.on("exit", (code) => reject(new Error(`${command} exited (${code})`)));
    lines.on("line", (line) => {
      const m = re.exec(line);
      if (m) resolve([child, m[1], lines]);
    });
  });
}

const within = (promise, what) =>
  Promise.race([promise, new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer in 60 s`)), 60_000))]);

async function call(url, size) {
  const client = new Client({ name: "ts_host", version: "0" });
  await within(client.connect(new GuardedTransport(url)), "connect");
  try {
    const result = await within(client.callTool({ name: "big_result", arguments: { size } }), "big_result");
    if (result.content[0].text !== pattern(size)) throw new Error(`a ${size}-byte result is torn`);
    return "intact";
  } catch (error) {
    if (typed(error) instanceof OutcomeUnknown) return "outcome-unknown";
    throw error;
  } finally {
    await client.close();
  }
}

const ts = path.join(repo, "interop", "ts");
const [, server] = await start("node", [path.join(ts, "server.mjs"), "--host", "127.0.0.1", "--port", "0"], { cwd: ts }, /^listening (\S+)/);
console.log(`ts_host: the official TS SDK's server at ${server}`);
if ((await call(server, 4 * MIB)) !== "intact") throw new Error("the uncut 4 MiB result was not delivered");
console.log("ts_host: a 4 MiB result, intact");

const upstream = new URL(server).host;
const [kit, hello, kitLines] = await start(kitBinary, ["serve", "--upstream", upstream], {}, /^(\{.*)$/);
const proxy = JSON.parse(hello).url;
const answers = [];
kitLines.on("line", (line) => answers.shift()?.(line));
const command = (line) => new Promise((resolve) => { answers.push(resolve); kit.stdin.write(line + "\n"); });
const outcomes = [];
for (const offset of [2_000, 1_000_000, 2_500_000, 4_100_000]) {
  await command(`cut ${offset}`);
  outcomes.push(`${offset}: ${await call(proxy, 4 * MIB)}`);
}
const cuts = JSON.parse(await command("cuts")).cuts;
console.log(`ts_host: through the fault proxy (${cuts} cuts): ${outcomes.join(", ")}`);
if (cuts !== 4) throw new Error(`the proxy cut ${cuts} answers, not 4`);
process.exit(0);
