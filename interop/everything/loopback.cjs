// Preloaded into @modelcontextprotocol/server-everything by server.cjs (the same as
// `node --require ./loopback.cjs`): the server calls `app.listen(PORT)` with no host, which Node
// binds to every interface. Here a listen without a host binds $SSEGATE_LISTEN_HOST (default
// 127.0.0.1), and once the server listens this prints `listening http://HOST:PORT/mcp` on stdout,
// so a harness that started it on port 0 learns the port. The same idea as
// conformance/loopback.cjs.
//
// Without a host Node binds at once; with one it first resolves the host through `dns.lookup`.
// During the `listen` call the lookup of HOST answers at once, so the bind happens before
// `listen` returns, as without a host. A server that ends up listening anywhere else ends the
// process.
"use strict";
const dns = require("node:dns");
const net = require("node:net");

const HOST = process.env.SSEGATE_LISTEN_HOST || "127.0.0.1";
const listen = net.Server.prototype.listen;

function announce(server) {
  server.once("listening", () => {
    const address = server.address();
    if (address === null || typeof address !== "object" || address.address !== HOST) {
      console.error(`loopback.cjs: a server listens on ${JSON.stringify(address)}, not ${HOST}`);
      process.exit(1);
    }
    const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
    console.log(`listening http://${host}:${address.port}/mcp`);
  });
}

net.Server.prototype.listen = function (...args) {
  const [first, second] = args;
  if (args.length === 0 || typeof first === "function") {
    // listen([callback]): a random port.
    args.unshift(0, HOST);
  } else if (
    (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) &&
    typeof second !== "string"
  ) {
    // listen(port[, backlog][, callback]).
    args.splice(1, 0, HOST);
  } else if (
    first !== null &&
    typeof first === "object" &&
    first.port !== undefined &&
    first.host === undefined &&
    first.path === undefined
  ) {
    // listen({port, ...}[, callback]).
    args[0] = { ...first, host: HOST };
  } else if (typeof first === "number" || typeof first === "string" || (first && first.port !== undefined)) {
    // An explicit host: refused, this process binds only HOST.
    console.error(`loopback.cjs: refusing to listen with an explicit host: ${JSON.stringify(args)}`);
    process.exit(1);
  } else {
    // A path or a handle: as asked.
    return listen.apply(this, args);
  }
  announce(this);
  const lookup = dns.lookup;
  dns.lookup = function (host, ...rest) {
    const callback = rest[rest.length - 1];
    if (host === HOST && typeof callback === "function") {
      const family = net.isIPv6(HOST) ? 6 : 4;
      if (rest.length > 1 && rest[0] !== null && typeof rest[0] === "object" && rest[0].all) {
        callback(null, [{ address: HOST, family }]);
      } else {
        callback(null, HOST, family);
      }
      return undefined;
    }
    return lookup.call(this, host, ...rest);
  };
  try {
    return listen.apply(this, args);
  } finally {
    dns.lookup = lookup;
  }
};
