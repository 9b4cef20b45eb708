#!/usr/bin/env node
// The `ssegate` command of the npm package: runs the native `ssegate` of this platform, which an
// optional dependency of this package carries (one package per platform, `ssegate-<platform>`:
// npm installs only the one whose `os`, `cpu` and `libc` fit). The arguments are passed on, the
// standard streams are the native command's own (inherited, nothing is copied through Node), its
// exit code is this process's, and SIGINT, SIGTERM and SIGHUP sent to this process are passed on
// to it; when it dies of a signal, this process dies of the same signal.
//
// SSEGATE_BINARY=/path/to/ssegate runs that binary instead (a local build, an unlisted platform).
"use strict";

const { spawn } = require("node:child_process");
const path = require("node:path");
const os = require("node:os");

// Node's platform and architecture (and on Linux the C library) -> the package with the binary.
// Keep in step with node/pack's TARGETS and the optionalDependencies of package.json.
const PACKAGES = {
  "linux-x64-gnu": "ssegate-linux-x64-gnu",
  "linux-arm64-gnu": "ssegate-linux-arm64-gnu",
  "win32-x64": "ssegate-win32-x64-gnu",
};

/** `linux-x64-gnu`, `linux-arm64-musl`, `darwin-arm64`, `win32-x64`, ... */
function platformKey() {
  const key = `${process.platform}-${process.arch}`;
  if (process.platform !== "linux") return key;
  // glibc reports its version in the process report; musl does not.
  let glibc = false;
  try {
    const header = process.report.getReport().header;
    glibc = Boolean(header && header.glibcVersionRuntime);
  } catch {
    glibc = false;
  }
  return `${key}-${glibc ? "gnu" : "musl"}`;
}

function fail(message) {
  process.stderr.write(`ssegate: ${message}\n`);
  process.exit(1);
}

function nativeBinary() {
  if (process.env.SSEGATE_BINARY) return process.env.SSEGATE_BINARY;
  const key = platformKey();
  const pkg = PACKAGES[key];
  const supported = Object.keys(PACKAGES).join(", ");
  if (!pkg) {
    fail(
      `no native binary is published for this platform (${key}); the npm package has ` +
        `${supported}. Install the command with \`cargo install ssegate-cli\` and use it ` +
        `directly, or set SSEGATE_BINARY to an ssegate binary.`,
    );
  }
  let dir;
  try {
    dir = path.dirname(require.resolve(`${pkg}/package.json`));
  } catch {
    fail(
      `the native binary for this platform (${key}) is in the package ${pkg}, which is not ` +
        `installed (optional dependencies left out, e.g. --omit=optional or --no-optional, or a ` +
        `lock file made on another platform?). Reinstall ssegate with optional dependencies, or ` +
        `set SSEGATE_BINARY to an ssegate binary.`,
    );
  }
  return path.join(dir, process.platform === "win32" ? "ssegate.exe" : "ssegate");
}

const binary = nativeBinary();
const child = spawn(binary, process.argv.slice(2), { stdio: "inherit", windowsHide: false });

const FORWARDED = process.platform === "win32" ? ["SIGINT", "SIGBREAK"] : ["SIGINT", "SIGTERM", "SIGHUP"];
const forwarders = new Map();
for (const signal of FORWARDED) {
  const forward = () => {
    try {
      child.kill(signal);
    } catch {
      // The child is already gone; its exit event follows.
    }
  };
  forwarders.set(signal, forward);
  process.on(signal, forward);
}

child.on("error", (error) => {
  fail(`cannot run ${binary}: ${error.message}`);
});

child.on("exit", (code, signal) => {
  for (const [name, forward] of forwarders) process.removeListener(name, forward);
  if (signal) {
    // Die of the same signal, so that whoever started us sees what happened to the command.
    process.kill(process.pid, signal);
    // A signal this process ignores or cannot receive: the shell convention.
    process.exit(128 + (os.constants.signals[signal] || 0));
  }
  process.exit(code === null ? 1 : code);
});
