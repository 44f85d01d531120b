// Starts a real `herald serve` for a test file: loopback, free ports, a temp data dir,
// the demo agent. Stopped (and its data dir removed) by `stop()`.

import { spawn, execFile, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const here = fileURLToPath(new URL(".", import.meta.url));
/** The binary: HERALD_BIN, or the workspace's debug build. */
export const HERALD_BIN = process.env["HERALD_BIN"] ?? resolve(here, "../../../../target/debug/herald");

export const TOKEN = "4f1c9e2a7b3d5f60812a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d";

export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.unref();
    s.on("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      s.close(() => res(port));
    });
  });
}

/** Resolves once `port` on loopback accepts a connection; rejects when `child` exits first. */
export async function waitForPort(port: number, child: ChildProcess, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`herald exited with ${child.exitCode}`);
    const up = await new Promise<boolean>((res) => {
      const sock = connect(port, "127.0.0.1");
      sock.once("connect", () => {
        sock.destroy();
        res(true);
      });
      sock.once("error", () => res(false));
    });
    if (up) return;
    if (Date.now() > deadline) throw new Error(`herald did not listen on ${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface HeraldOptions {
  /** Extra environment, e.g. MOBILE_ALLOW_ALL_USERS. */
  env?: Record<string, string>;
  /** Reuse a data dir (a restart). */
  dataDir?: string;
  mobilePort?: number;
}

export class Herald {
  readonly dataDir: string;
  readonly mobilePort: number;
  private child: ChildProcess | undefined;
  private readonly env: Record<string, string>;
  private readonly ownsDir: boolean;
  log = "";

  private constructor(dataDir: string, ownsDir: boolean, mobilePort: number, env: Record<string, string>) {
    this.dataDir = dataDir;
    this.ownsDir = ownsDir;
    this.mobilePort = mobilePort;
    this.env = env;
  }

  static async start(options: HeraldOptions = {}): Promise<Herald> {
    const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "herald-sdk-"));
    const port = options.mobilePort ?? (await freePort());
    const h = new Herald(dataDir, options.dataDir === undefined, port, options.env ?? {});
    await h.run();
    return h;
  }

  get url(): string {
    return `ws://127.0.0.1:${this.mobilePort}/ws`;
  }

  /** Starts the process (again, after `kill`), on the same port and data dir. */
  async run(): Promise<void> {
    const child = spawn(
      HERALD_BIN,
      ["serve", "--host", "127.0.0.1", "--gadget-port", "0", "--mobile-port", String(this.mobilePort), "--admin-port", "0", "--data-dir", this.dataDir],
      {
        env: { PATH: process.env["PATH"] ?? "", HOME: this.dataDir, RUST_LOG: "warn", MOBILE_TOKEN: TOKEN, ...this.env },
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    child.stderr?.on("data", (d: Buffer) => {
      this.log += d.toString();
    });
    this.child = child;
    await waitForPort(this.mobilePort, child);
  }

  /** Ends the process at once, as a crash or power cut would. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGKILL");
    await exited;
    this.child = undefined;
  }

  /** Runs a herald CLI command against this server's data dir. */
  async cli(...args: string[]): Promise<string> {
    const { stdout } = await promisify(execFile)(HERALD_BIN, [...args, "--data-dir", this.dataDir], {
      env: { PATH: process.env["PATH"] ?? "", HOME: this.dataDir, MOBILE_TOKEN: TOKEN, ...this.env },
    });
    return stdout;
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(t);
    }
    this.child = undefined;
    if (this.ownsDir) rmSync(this.dataDir, { recursive: true, force: true });
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
