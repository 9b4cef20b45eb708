// Preloaded into the conformance suite by conformance/run (NODE_OPTIONS=--require): the suite's
// test servers call `listen(0)` with no host, which Node binds to every interface. Here a listen
// without a host binds 127.0.0.1 (the servers hand the client `http://localhost:<port>`).
//
// Some servers read `server.address().port` right after `listen(0)` returns. Without a host Node
// binds at once; with one it first resolves the host through `dns.lookup`, so the address would
// not be known yet. During the `listen` call, the lookup of 127.0.0.1 answers at once, so the
// bind happens before `listen` returns, as without a host. A server that ends up listening
// anywhere else ends the process (the run fails).
"use strict";
const dns = require("node:dns");
const net = require("node:net");

const HOST = "127.0.0.1";
const listen = net.Server.prototype.listen;

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
  } else {
    // A path, a handle or an explicit host: as asked.
    return listen.apply(this, args);
  }
  const lookup = dns.lookup;
  dns.lookup = function (host, ...rest) {
    const callback = rest[rest.length - 1];
    if (host === HOST && typeof callback === "function") {
      // Node 22 asks for `{all: true}`: a list of addresses.
      if (rest.length > 1 && rest[0] !== null && typeof rest[0] === "object" && rest[0].all) {
        callback(null, [{ address: HOST, family: 4 }]);
      } else {
        callback(null, HOST, 4);
      }
      return undefined;
    }
    return lookup.call(this, host, ...rest);
  };
  // Should Node stop resolving the host this way, the server must still not listen elsewhere.
  this.once("listening", () => {
    const address = this.address();
    if (address !== null && typeof address === "object" && address.address !== HOST) {
      console.error(`loopback.cjs: a server listens on ${address.address}, not ${HOST}`);
      process.exit(1);
    }
  });
  try {
    return listen.apply(this, args);
  } finally {
    dns.lookup = lookup;
  }
};
