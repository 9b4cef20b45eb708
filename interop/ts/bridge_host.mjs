// A stdio MCP host on the official TypeScript SDK (`Client` + `StdioClientTransport`), for
// ssegate's interop tests of `ssegate bridge` (cli/tests/cli_bridge_interop.rs).
//
//   node bridge_host.mjs SSEGATE URL [SIZE]
//
// Spawns `SSEGATE bridge URL` as its stdio server (the bridge's stderr is passed through), then:
// `initialize` (the SDK's own, at its latest version), `tools/list`, `tools/call big_result
// {size: SIZE}` (default 4 MiB), `tools/call progress {count: 3, delay_ms: 150}` with an
// `onprogress` callback (the SDK sends a progressToken), and closes (stdin ended; the SDK waits
// 2 s before SIGTERM). Prints one line of JSON on stdout:
//   {"sdk", "protocolVersion", "serverName", "tools", "toolNames", "size", "textLength",
//    "intact", "firstDiff", "head", "tail", "isError", "progress", "progressWire",
//    "progressText", "closeMs"}
// `intact`: the text equals the interop pattern (16-byte blocks, each its byte offset as 15 hex
// digits and `|`, truncated to SIZE); `firstDiff`: the first differing offset, or null;
// `progress`: what the callback saw; `progressWire`: the progress notifications that arrived
// (the SDK runs notification handlers a microtask later but a response at once, and drops the
// progress handler with the response: a notification read in the same chunk as the response
// never reaches the callback, whoever sent it).
// Exits 1 (a message on stderr) when anything fails, or after 60 s in all.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [ssegate, url, sizeArg] = process.argv.slice(2);
if (!ssegate || !url) {
    console.error('usage: node bridge_host.mjs SSEGATE URL [SIZE]');
    process.exit(2);
}
const size = Number(sizeArg ?? 4 << 20);

setTimeout(() => {
    console.error('bridge_host.mjs: not done within 60 s');
    process.exit(1);
}, 60_000).unref();

/** The interop servers' content: `size` bytes of 16-byte blocks `<offset as %015x>|`. */
function pattern(size) {
    const blocks = Math.ceil(size / 16);
    const parts = new Array(blocks);
    for (let i = 0; i < blocks; i++) {
        parts[i] = (i * 16).toString(16).padStart(15, '0') + '|';
    }
    return parts.join('').slice(0, size);
}

function firstDiff(a, b) {
    const n = Math.min(a.length, b.length);
    for (let i = 0; i < n; i++) {
        if (a[i] !== b[i]) return i;
    }
    return a.length === b.length ? null : n;
}

try {
    const transport = new StdioClientTransport({
        command: ssegate,
        args: ['bridge', url],
        stderr: 'inherit'
    });
    // The Transport interface's hook, which the Client calls with the version `initialize` agreed.
    let protocolVersion = null;
    transport.setProtocolVersion = v => {
        protocolVersion = v;
    };
    const client = new Client({ name: 'ssegate-bridge-host-ts', version: '0.0.0' });
    await client.connect(transport, { timeout: 20_000 });
    // The progress notifications as they arrive from the bridge, before the SDK dispatches them.
    const progressWire = [];
    const dispatch = transport.onmessage;
    transport.onmessage = message => {
        if (message.method === 'notifications/progress') progressWire.push(message.params.progress);
        dispatch(message);
    };

    const listed = await client.listTools({}, { timeout: 20_000 });
    const toolNames = listed.tools.map(t => t.name).sort();

    const result = await client.callTool({ name: 'big_result', arguments: { size } }, undefined, {
        timeout: 30_000
    });
    const text = result.content?.[0]?.text ?? '';
    const expected = pattern(size);

    const progress = [];
    const done = await client.callTool({ name: 'progress', arguments: { count: 3, delay_ms: 150 } }, undefined, {
        timeout: 20_000,
        onprogress: p => progress.push(p.progress)
    });

    const closing = Date.now();
    await client.close();
    const closeMs = Date.now() - closing;

    console.log(
        JSON.stringify({
            sdk: 'ts',
            protocolVersion,
            serverName: client.getServerVersion()?.name ?? null,
            tools: toolNames.length,
            toolNames,
            size,
            textLength: text.length,
            intact: text === expected,
            firstDiff: firstDiff(text, expected),
            head: text.slice(0, 32),
            tail: text.slice(-32),
            isError: result.isError ?? false,
            progress,
            progressWire,
            progressText: done.content?.[0]?.text ?? null,
            closeMs
        })
    );
    process.exit(0);
} catch (e) {
    console.error(`bridge_host.mjs: ${e?.stack ?? e}`);
    process.exit(1);
}

