// An MCP server on the official TypeScript SDK, for ssegate's interop tests.
//
//   node server.mjs [--port N] [--host H] [--stateless] [--forgetful] [--legacy]
//                   [--tasks [--task-delay-ms N] [--poll-interval-ms N] [--tasks-required]]
//
// Port: --port, else $PORT, else 0 (any free port). Once listening it prints one line
// `listening http://HOST:PORT/mcp` on stdout, so a harness started with port 0 learns the port.
//
// Streamable HTTP at /mcp, one session per `initialize` (Mcp-Session-Id), with the in-memory
// EventStore below (resumable: `GET` + `Last-Event-ID` replays strictly after the id). Tools:
//   big_result {size?}           one text content of `size` bytes (default 4 MiB), readOnlyHint
//   progress {count?, delay_ms?} `count` progress notifications (with the request's
//                                progressToken), then a small result
//   echo {text}                  the text back
//   charge {size?}               NOT idempotent: counts its executions; the result carries a
//                                receipt of `size` deterministic bytes (default 0)
//   count                        how many times `charge` ran in this process
//
// --legacy: the 2024-11-05 HTTP+SSE transport instead, on the SDK's SSEServerTransport: `GET /mcp`
// opens a session's event stream (its first event, `endpoint`, names
// `/messages?sessionId=<id>`), each message is POSTed there (`202`, the answer on the stream), and
// `POST /mcp` is `404` as on any server of that transport. Same tools.
//
// --tasks: the SDK's experimental tasks (SEP-1686, protocol 2025-11-25): one process-wide
// InMemoryTaskStore (tasks scoped by session; it keeps a result until the task's ttl runs out,
// reading it does not delete it), `capabilities.tasks` ({list, cancel, requests.tools.call}), and
// `charge` registered with `registerToolTask` (`execution.taskSupport: 'optional'`, or 'required'
// with --tasks-required). A `tools/call` of `charge` with `params.task: {ttl}` answers a
// CreateTaskResult at once; the task stays `working` --task-delay-ms (default 200), then charge
// runs (counted) and the task is `completed`; `tasks/get` answers the task, `tasks/result` the
// CallToolResult (blocking until the task is terminal). Without `params.task`, an 'optional'
// charge is run as a task the SDK polls itself, and answered as a plain result.
//
// The content of big_result (and of charge's receipt) is deterministic: 16-byte blocks, each the
// block's byte offset as 15 lowercase hex digits and a `|`, truncated to `size`. A torn or
// duplicated segment cannot go unnoticed.
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import { z } from 'zod';

const args = process.argv.slice(2);
const flag = name => args.includes(name);
const option = name => {
    const i = args.indexOf(name);
    return i >= 0 && i + 1 < args.length ? args[i + 1] : undefined;
};
const host = option('--host') ?? '127.0.0.1';
const port = Number(option('--port') ?? process.env.PORT ?? 0);
const stateless = flag('--stateless');
const forgetful = flag('--forgetful');
const tasks = flag('--tasks');
const legacy = flag('--legacy');
const taskDelayMs = Number(option('--task-delay-ms') ?? 200);
const pollIntervalMs = Number(option('--poll-interval-ms') ?? 100);
const tasksRequired = flag('--tasks-required');
/** One store for the process (the SDK scopes each task to the session that made it). */
const taskStore = tasks ? new InMemoryTaskStore() : undefined;

/** The deterministic content: `size` bytes of 16-byte blocks `<offset as %015x>|`. */
export function pattern(size) {
    const blocks = Math.ceil(size / 16);
    const parts = new Array(blocks);
    for (let i = 0; i < blocks; i++) {
        parts[i] = (i * 16).toString(16).padStart(15, '0') + '|';
    }
    return parts.join('').slice(0, size);
}

/**
 * A correct in-memory EventStore. Event ids have the shape of the SDK's example store,
 * `<streamId>_<ms>_<random>` (opaque to a client), but a replay does not sort them as strings
 * (the example does, which reorders events stored within one millisecond): each stream keeps its
 * events in the order they were stored, and a replay sends the stream's events strictly after the
 * given id, in that order. An unknown id is refused by `getStreamIdForEventId` (the SDK answers
 * 400), never answered with another stream.
 *
 * `forgetful`: stores nothing and knows no id (a lost buffer).
 */
class InMemoryEventStore {
    constructor(forgetful) {
        this.forgetful = forgetful;
        /** streamId -> [{ id, message }] in the order stored */
        this.streams = new Map();
        /** eventId -> { streamId, index } */
        this.index = new Map();
    }

    async storeEvent(streamId, message) {
        const id = `${streamId}_${Date.now()}_${Math.random().toString(36).substring(2, 10)}`;
        if (this.forgetful) return id;
        let events = this.streams.get(streamId);
        if (events === undefined) {
            events = [];
            this.streams.set(streamId, events);
        }
        this.index.set(id, { streamId, index: events.length });
        events.push({ id, message });
        return id;
    }

    async getStreamIdForEventId(eventId) {
        return this.index.get(eventId)?.streamId;
    }

    async replayEventsAfter(lastEventId, { send }) {
        const found = this.index.get(lastEventId);
        if (found === undefined) return '';
        const events = this.streams.get(found.streamId);
        for (const { id, message } of events.slice(found.index + 1)) {
            await send(id, message);
        }
        return found.streamId;
    }
}

let charges = 0;

function buildServer() {
    const server = new McpServer(
        { name: 'ssegate-interop-ts', version: '0.0.0' },
        tasks
            ? {
                  capabilities: {
                      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } }
                  },
                  taskStore
              }
            : undefined
    );
    server.registerTool(
        'big_result',
        {
            description: 'One text content of `size` deterministic bytes (default 4 MiB)',
            inputSchema: { size: z.number().int().min(0).max(256 << 20).optional() },
            annotations: { readOnlyHint: true }
        },
        async ({ size }) => ({ content: [{ type: 'text', text: pattern(size ?? 4 << 20) }] })
    );
    server.registerTool(
        'progress',
        {
            description: 'Sends `count` progress notifications, then a small result',
            inputSchema: {
                count: z.number().int().min(0).max(10000).optional(),
                delay_ms: z.number().int().min(0).max(60000).optional()
            },
            annotations: { readOnlyHint: true }
        },
        async ({ count, delay_ms }, extra) => {
            const n = count ?? 5;
            const token = extra._meta?.progressToken;
            for (let i = 1; i <= n; i++) {
                if (delay_ms) await new Promise(r => setTimeout(r, delay_ms));
                if (token !== undefined) {
                    await extra.sendNotification({
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
            inputSchema: { text: z.string() },
            annotations: { readOnlyHint: true }
        },
        async ({ text }) => ({ content: [{ type: 'text', text }] })
    );
    const charge = size => {
        charges += 1;
        const content = [{ type: 'text', text: `charged ${charges}` }];
        if (size) content.push({ type: 'text', text: pattern(size) });
        return { content };
    };
    const chargeConfig = {
        description: 'Not idempotent: counts its executions; a receipt of `size` bytes',
        inputSchema: { size: z.number().int().min(0).max(256 << 20).optional() },
        annotations: { readOnlyHint: false, idempotentHint: false, destructiveHint: false }
    };
    if (tasks) {
        server.experimental.tasks.registerToolTask(
            'charge',
            { ...chargeConfig, execution: { taskSupport: tasksRequired ? 'required' : 'optional' } },
            {
                createTask: async ({ size }, extra) => {
                    // ttl: the one the client asked for (null when it asked for none: kept for
                    // the life of the process).
                    const task = await extra.taskStore.createTask({
                        ttl: extra.taskRequestedTtl ?? null,
                        pollInterval: pollIntervalMs
                    });
                    setTimeout(() => {
                        extra.taskStore
                            .storeTaskResult(task.taskId, 'completed', charge(size))
                            .catch(e => console.error(`task ${task.taskId}:`, e));
                    }, taskDelayMs);
                    return { task };
                },
                getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
                getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId)
            }
        );
    } else {
        server.registerTool('charge', chargeConfig, async ({ size }) => charge(size));
    }
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

/** sessionId -> transport */
const sessions = new Map();

async function readJson(req) {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const text = Buffer.concat(chunks).toString('utf8');
    return text.length === 0 ? undefined : JSON.parse(text);
}

function jsonError(res, status, message) {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

/** sessionId -> SSEServerTransport (--legacy) */
const legacySessions = new Map();

/** --legacy: the 2024-11-05 HTTP+SSE transport. */
async function handleLegacy(req, res, url) {
    if (req.method === 'GET' && url.pathname === '/mcp') {
        const transport = new SSEServerTransport('/messages', res);
        legacySessions.set(transport.sessionId, transport);
        res.on('close', () => legacySessions.delete(transport.sessionId));
        await buildServer().connect(transport);
        return;
    }
    if (req.method === 'POST' && url.pathname === '/messages') {
        const transport = legacySessions.get(url.searchParams.get('sessionId') ?? '');
        if (transport === undefined) return jsonError(res, 404, 'Session not found');
        return transport.handlePostMessage(req, res);
    }
    return jsonError(res, 404, 'not found');
}

async function handle(req, res) {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (legacy) return handleLegacy(req, res, url);
    if (url.pathname !== '/mcp') return jsonError(res, 404, 'not found');
    let body;
    if (req.method === 'POST') {
        try {
            body = await readJson(req);
        } catch {
            return jsonError(res, 400, 'Parse error');
        }
    }
    if (stateless) {
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
        const server = buildServer();
        res.on('close', () => {
            transport.close();
            server.close();
        });
        await server.connect(transport);
        return transport.handleRequest(req, res, body);
    }
    const sessionId = req.headers['mcp-session-id'];
    if (typeof sessionId === 'string') {
        const transport = sessions.get(sessionId);
        if (transport === undefined) return jsonError(res, 404, 'Session not found');
        return transport.handleRequest(req, res, body);
    }
    const initializing = req.method === 'POST' && body?.method === 'initialize';
    if (!initializing) return jsonError(res, 400, 'Bad Request: no session');
    const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: new InMemoryEventStore(forgetful),
        onsessioninitialized: id => {
            sessions.set(id, transport);
        },
        onsessionclosed: id => {
            sessions.delete(id);
        }
    });
    transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await buildServer().connect(transport);
    return transport.handleRequest(req, res, body);
}

const http = createServer((req, res) => {
    handle(req, res).catch(e => {
        console.error('request failed:', e);
        if (!res.headersSent) jsonError(res, 500, 'Internal error');
        else res.destroy();
    });
});
http.listen(port, host, () => {
    const address = http.address();
    console.log(`listening http://${address.address}:${address.port}/mcp`);
});
for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => process.exit(0));
}
