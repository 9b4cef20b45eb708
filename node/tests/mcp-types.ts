// `tsc --noEmit --strict` over `ssegate/mcp`'s hand-written types (mcp.d.ts): a GuardedTransport is
// the SDK's own `Transport` and goes to `Client.connect`; wrong options are refused. Never run.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import {
  CODE,
  GuardedTransport,
  KIND,
  OUTCOME_UNKNOWN,
  OutcomeUnknown,
  typed,
  type GuardedErrorData,
} from "../mcp.js";

const transport: Transport = new GuardedTransport("http://127.0.0.1:1/mcp", {
  timeout: 30,
  idleTimeout: null,
  maxEvent: 1 << 20,
  requestInit: { headers: { "x-user": "a" } },
  fetch: (url, init) => fetch(url, init),
});
const client = new Client({ name: "types", version: "0" });
void client.connect(transport);

const guarded = new GuardedTransport(new URL("http://127.0.0.1:1/mcp"));
const session: string | undefined = guarded.sessionId;
void guarded.terminateSession();

const error = typed(new McpError(OUTCOME_UNKNOWN, "lost"));
if (error instanceof OutcomeUnknown) {
  const data: GuardedErrorData = error.data;
  const lost: boolean = data.kind === KIND.REFUSED && error.code === CODE.OUTCOME_UNKNOWN?.value;
  void lost;
}
void session;

// @ts-expect-error: no such option
new GuardedTransport("http://127.0.0.1:1/mcp", { timeOut: 1 });
// @ts-expect-error: durations are numbers of seconds
new GuardedTransport("http://127.0.0.1:1/mcp", { timeout: "1s" });
// @ts-expect-error: a URL is required
new GuardedTransport();
