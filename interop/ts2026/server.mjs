// An MCP server on the official TypeScript SDK v2 (`@modelcontextprotocol/server`, which serves
// MCP revision 2026-07-28), for ssegate's interop tests.
//
//   node server.mjs [--port N] [--host H] [--response-mode auto|sse|json] [--only-2026-07-28] [--verbose]
//
// Port: --port, else $PORT, else 0 (any free port). Binds only H (default 127.0.0.1). Once
// listening it prints one line `listening http://HOST:PORT/mcp` on stdout, so a harness started
// with port 0 learns the port.
//
// Served by the SDK's own entry, `createMcpHandler(factory)` (one fresh McpServer per HTTP request),
// mounted on `node:http` with `toNodeHandler` from `@modelcontextprotocol/node`, at /mcp:
//
// - 2026-07-28 requests (a `_meta` envelope naming `io.modelcontextprotocol/protocolVersion`): the
//   2026-07-28 path. Stateless: no initialize, no Mcp-Session-Id, no event store, no resumption;
//   POST only. `--response-mode` is the SDK's `responseMode`: `auto` (the SDK default: one JSON
//   body, upgraded to an SSE stream when the handler sends a notification before its result, as
//   `progress` does), `sse` (always SSE), `json` (never SSE; notifications dropped). SSE events
//   are `event: message` + `data:`, with no `id:` and no `retry:`.
// - 2025-era requests (no envelope, e.g. `initialize`): the SDK's default stateless legacy
//   fallback (a stateless 1.x-style streamable HTTP transport per request; GET/DELETE 405).
//   `--only-2026-07-28`: `legacy: 'reject'`, they are refused with the unsupported-protocol-version
//   error instead.
// `--verbose`: the SDK's `onerror` reports (rejected requests, handler failures) on stderr.
//
// Tools (the same as interop/ts/server.mjs):
//   big_result {size?}           one text content of `size` bytes (default 4 MiB), readOnlyHint
//   progress {count?, delay_ms?} `count` progress notifications (with the request's
//                                progressToken), then a small result
//   echo {text}                  the text back
//   charge {size?}               NOT idempotent: counts its executions; the result carries a
//                                receipt of `size` deterministic bytes (default 0)
//   count                        how many times `charge` ran in this process
//
// The content of big_result (and of charge's receipt) is deterministic: 16-byte blocks, each the
// block's byte offset as 15 lowercase hex digits and a `|`, truncated to `size`. A torn or
// duplicated segment cannot go unnoticed.
import { createServer } from 'node:http';
import { McpServer, createMcpHandler } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { z } from 'zod';

const args = process.argv.slice(2);
const flag = name => args.includes(name);
const option = name => {
    const i = args.indexOf(name);
    return i >= 0 && i + 1 < args.length ? args[i + 1] : undefined;
};
const host = option('--host') ?? '127.0.0.1';
const port = Number(option('--port') ?? process.env.PORT ?? 0);
const responseMode = option('--response-mode') ?? 'auto';
if (!['auto', 'sse', 'json'].includes(responseMode)) {
    console.error(`--response-mode must be auto, sse or json (got ${responseMode})`);
    process.exit(2);
}
const only2026 = flag('--only-2026-07-28');
const verbose = flag('--verbose');

/** The deterministic content: `size` bytes of 16-byte blocks `<offset as %015x>|`. */
export function pattern(size) {
    const blocks = Math.ceil(size / 16);
    const parts = new Array(blocks);
    for (let i = 0; i < blocks; i++) {
        parts[i] = (i * 16).toString(16).padStart(15, '0') + '|';
    }
    return parts.join('').slice(0, size);
}

// Process-wide: the factory builds a new McpServer for every request.
let charges = 0;

function buildServer() {
    const server = new McpServer({ name: 'ssegate-interop-ts2026', version: '0.0.0' });
    server.registerTool(
        'big_result',
        {
            description: 'One text content of `size` deterministic bytes (default 4 MiB)',
            inputSchema: z.object({ size: z.number().int().min(0).max(256 << 20).optional() }),
            annotations: { readOnlyHint: true }
        },
        async ({ size }) => ({ content: [{ type: 'text', text: pattern(size ?? 4 << 20) }] })
    );
    server.registerTool(
        'progress',
        {
            description: 'Sends `count` progress notifications, then a small result',
            inputSchema: z.object({
                count: z.number().int().min(0).max(10000).optional(),
                delay_ms: z.number().int().min(0).max(60000).optional()
            }),
            annotations: { readOnlyHint: true }
        },
        async ({ count, delay_ms }, ctx) => {
            const n = count ?? 5;
            const token = ctx.mcpReq._meta?.progressToken;
            for (let i = 1; i <= n; i++) {
                if (delay_ms) await new Promise(r => setTimeout(r, delay_ms));
                if (token !== undefined) {
                    await ctx.mcpReq.notify({
                        method: 'notifications/progress',
                        params: { progressToken: token, progress: i, total: n, message: `step ${i}` }
                    });
                }
            }
            return { content: [{ type: 'text', text: `done ${n}` }] };
        }
    );
    server.registerTool(
        'echo',
        {
            description: 'The text back',
            inputSchema: z.object({ text: z.string() }),
            annotations: { readOnlyHint: true }
        },
        async ({ text }) => ({ content: [{ type: 'text', text }] })
    );
    server.registerTool(
        'charge',
        {
            description: 'Not idempotent: counts its executions; a receipt of `size` bytes',
            inputSchema: z.object({ size: z.number().int().min(0).max(256 << 20).optional() }),
            annotations: { readOnlyHint: false, idempotentHint: false, destructiveHint: false }
        },
        async ({ size }) => {
            charges += 1;
            const content = [{ type: 'text', text: `charged ${charges}` }];
            if (size) content.push({ type: 'text', text: pattern(size) });
            return { content };
        }
    );
    server.registerTool(
        'count',
        {
            description: 'How many times `charge` ran in this process',
            annotations: { readOnlyHint: true }
        },
        async () => ({ content: [{ type: 'text', text: String(charges) }] })
    );
    return server;
}

const mcp = createMcpHandler(() => buildServer(), {
    responseMode,
    ...(only2026 && { legacy: 'reject' }),
    ...(verbose && { onerror: e => console.error('mcp:', e.message) })
});
const node = toNodeHandler(mcp, { onerror: e => console.error('adapter:', e) });

function notFound(res) {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'not found' }, id: null }));
}

const http = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname !== '/mcp') return notFound(res);
    node(req, res).catch(e => {
        console.error('request failed:', e);
        if (!res.headersSent) {
            res.writeHead(500, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal error' }, id: null }));
        } else res.destroy();
    });
});
http.listen(port, host, () => {
    const address = http.address();
    console.log(`listening http://${address.address}:${address.port}/mcp`);
});
for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => process.exit(0));
}
