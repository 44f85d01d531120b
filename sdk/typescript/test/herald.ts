// Starts a real `herald serve` for a test file: loopback, a temp data dir, the demo agent.
// Stopped (and its data dir removed) by `stop()`.
//
// Ports: herald binds port 0 for each of its listeners and says in its log which port it
// got, so no port is ever picked as free, let go, and bound again (another process's
// socket could take it in between). A restarted herald gets new ports. A test whose client
// must come back to the same URL after a restart puts a `TcpProxy` in front: the proxy
// holds its listening port for the whole test and forwards to wherever herald is now.

import { spawn, execFile, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, connect, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const here = fileURLToPath(new URL(".", import.meta.url));
/** The binary: HERALD_BIN, or the workspace's debug build. */
export const HERALD_BIN = process.env["HERALD_BIN"] ?? resolve(here, "../../../../target/debug/herald");

export const TOKEN = "4f1c9e2a7b3d5f60812a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d";

/** Where a running herald listens, as its log says. */
export interface HeraldUrls {
  /** ws://127.0.0.1:PORT/gadget */
  gadget: string;
  /** ws://127.0.0.1:PORT/ws */
  mobile: string;
  /** http://127.0.0.1:PORT/ (the admin listener: console, API, the in-tab gadget) */
  console: string;
}

// herald serve's own lines (target herald_server, level info), one per listener.
const LISTENING: Record<keyof HeraldUrls, RegExp> = {
  gadget: /listening for gadgets url=(\S+)/,
  mobile: /listening for phones url=(\S+)/,
  console: /the console and admin API.*? url=(\S+)/,
};
/** Without colours, whatever tracing decides about the pipe. */
const plain = (s: string): string => s.replace(/\x1b\[[0-9;]*m/g, "");

export interface HeraldOptions {
  /** Extra environment, e.g. MOBILE_ALLOW_ALL_USERS; may replace MOBILE_TOKEN. */
  env?: Record<string, string>;
  /** Reuse a data dir (kept by `stop()`). */
  dataDir?: string;
  /** A configuration file, for `serve` and `cli`. */
  config?: string;
}

export class Herald {
  readonly dataDir: string;
  /** The current process's listeners; undefined while it is not running. */
  urls: HeraldUrls | undefined;
  /** Everything every run wrote to stderr. */
  log = "";
  readonly env: Record<string, string>;
  private child: ChildProcess | undefined;
  private readonly ownsDir: boolean;
  private readonly config: string[];

  private constructor(dataDir: string, ownsDir: boolean, env: Record<string, string>, config: string | undefined) {
    this.dataDir = dataDir;
    this.ownsDir = ownsDir;
    this.config = config === undefined ? [] : ["--config", config];
    const quiet = env["RUST_LOG"] ?? "warn";
    // herald_server at info: the lines that say where it listens.
    this.env = { PATH: process.env["PATH"] ?? "", HOME: dataDir, MOBILE_TOKEN: TOKEN, ...env, RUST_LOG: `${quiet},herald_server=info` };
  }

  static async start(options: HeraldOptions = {}): Promise<Herald> {
    const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "herald-sdk-"));
    const h = new Herald(dataDir, options.dataDir === undefined, options.env ?? {}, options.config);
    await h.run();
    return h;
  }

  private now(): HeraldUrls {
    if (!this.urls) throw new Error("herald is not running");
    return this.urls;
  }

  /** The phone WebSocket URL of the running process. */
  get url(): string {
    return this.now().mobile;
  }

  get mobilePort(): number {
    return Number(new URL(this.now().mobile).port);
  }

  get gadgetPort(): number {
    return Number(new URL(this.now().gadget).port);
  }

  get adminPort(): number {
    return Number(new URL(this.now().console).port);
  }

  /** A listener's port while the process runs, else undefined: a `TcpProxy` target. */
  port(which: keyof HeraldUrls): number | undefined {
    const url = this.urls?.[which];
    return url === undefined ? undefined : Number(new URL(url).port);
  }

  /** Starts the process (again, after `kill` or `halt`) on the same data dir and new ports. */
  async run(): Promise<void> {
    if (this.child) throw new Error("herald is running already");
    const args = ["serve", "--host", "127.0.0.1", "--gadget-port", "0", "--mobile-port", "0", "--admin-port", "0", "--data-dir", this.dataDir, ...this.config];
    const child = spawn(HERALD_BIN, args, { env: this.env, stdio: ["ignore", "ignore", "pipe"] });
    this.child = child;
    let mine = "";
    const found = new Promise<HeraldUrls>((res, rej) => {
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        rej(new Error(`herald did not say where it listens within 20 s; its log:\n${mine}`));
      }, 20_000);
      let listening = false;
      child.stderr?.on("data", (d: Buffer) => {
        this.log += d.toString();
        if (listening) return;
        mine += plain(d.toString());
        const seen = Object.entries(LISTENING).map(([k, re]) => [k, re.exec(mine)?.[1]] as const);
        if (seen.every(([, url]) => url !== undefined)) {
          listening = true;
          clearTimeout(timer);
          res(Object.fromEntries(seen) as unknown as HeraldUrls);
        }
      });
      child.once("exit", (code, signal) => {
        clearTimeout(timer);
        rej(new Error(`herald exited (${signal ?? code}) before it listened; its log:\n${mine}`));
      });
    });
    child.once("exit", () => {
      if (this.child === child) {
        this.child = undefined;
        this.urls = undefined;
      }
    });
    this.urls = await found;
  }

  private async end(signal: NodeJS.Signals): Promise<void> {
    const child = this.child;
    this.urls = undefined;
    if (!child) return;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill(signal);
      const t = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(t);
    }
    this.child = undefined;
  }

  /** Ends the process at once, as a crash or power cut would. */
  kill(): Promise<void> {
    return this.end("SIGKILL");
  }

  /** Stops the process as a service manager would (SIGTERM). */
  halt(): Promise<void> {
    return this.end("SIGTERM");
  }

  /** Runs a herald CLI command against this server's data dir. */
  async cli(...args: string[]): Promise<string> {
    const { stdout } = await promisify(execFile)(HERALD_BIN, [...args, "--data-dir", this.dataDir, ...this.config], { env: this.env });
    return stdout;
  }

  async stop(): Promise<void> {
    await this.halt();
    if (this.ownsDir) rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** Listens on a port the system picks and returns it; the server keeps it until closed. */
export async function listenOnLoopback(server: Server): Promise<number> {
  await new Promise<void>((res, rej) => {
    server.once("error", rej);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", rej);
      res();
    });
  });
  const addr = server.address();
  if (typeof addr !== "object" || !addr) throw new Error("no port");
  return addr.port;
}

/**
 * A TCP forwarder on a loopback port it holds from `open` to `close`: each connection goes
 * to `target()`, the port to reach now; while that is undefined (the server is down), a
 * connection is closed at once, before a byte is read. It can also swallow what the server
 * says and cut every connection, to play a network that fails. Whichever side of a
 * connection closes, the other is closed with it.
 */
export class TcpProxy {
  port = 0;
  /** While set, what the server sends is dropped (counted in `swallowed`). */
  muted = false;
  swallowed = 0;
  /** Bytes forwarded from clients to the server. */
  upstreamBytes = 0;
  /** Called after each piece forwarded from a client. */
  onUpstream: (() => void) | undefined;
  private readonly server: Server;
  /** Every socket on either side not yet closed. */
  private readonly live = new Set<Socket>();
  private swallowWaiters: (() => void)[] = [];

  private constructor(target: () => number | undefined) {
    this.server = createServer((client) => {
      this.track(client);
      const to = target();
      if (to === undefined) {
        client.destroy();
        return;
      }
      const upstream = connect(to, "127.0.0.1");
      this.track(upstream);
      client.on("data", (d) => {
        upstream.write(d);
        this.upstreamBytes += d.length;
        this.onUpstream?.();
      });
      upstream.on("data", (d) => {
        if (this.muted) {
          this.swallowed += d.length;
          for (const w of this.swallowWaiters.splice(0)) w();
        } else client.write(d);
      });
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
    });
  }

  private track(socket: Socket): void {
    this.live.add(socket);
    socket.on("error", () => socket.destroy());
    socket.on("close", () => this.live.delete(socket));
  }

  static async open(target: () => number | undefined): Promise<TcpProxy> {
    const p = new TcpProxy(target);
    p.port = await listenOnLoopback(p.server);
    // A test that failed before close() must not hang its file on this listener.
    p.server.unref();
    return p;
  }

  /** Resolves once the server said something that was swallowed. */
  swallowedSomething(): Promise<void> {
    return new Promise((r) => this.swallowWaiters.push(r));
  }

  /** Ends every connection now. */
  cut(): void {
    for (const socket of this.live) socket.destroy();
  }

  close(): Promise<void> {
    const closed = new Promise<void>((r) => this.server.close(() => r()));
    this.cut();
    return closed;
  }
}

/** Rejects after `ms`, naming what did not happen. */
export function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  const timeout = new Promise<never>((_, rej) => {
    timer = setTimeout(() => rej(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
