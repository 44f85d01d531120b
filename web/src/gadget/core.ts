// The gadget's device core: crates/tab-gadget (herald-device, the core the firmware, the
// simulator and the Linux gadget run) compiled to WebAssembly and served beside this
// script as device.wasm. The page is its host: it hands the core what happened (the
// WebSocket, the buttons, the microphone, the clock) and carries out the actions the
// core hands back. Nothing of the protocol or of the device's rules is written here.
//
// The module's functions take numbers; text and bytes cross through its memory (see
// crates/tab-gadget/src/abi.rs): `input` makes room for what goes in, a call that
// answers returns the length of its JSON at `output`, and an action's or a view's bulk
// (a frame, samples, pixels) is at `bulk`.

/** Milliseconds on the page's monotonic clock, as the core is told time. */
export type Millis = number;

export type Action =
  | { do: "connect" }
  | { do: "close"; code: number; reason: string }
  | { do: "send"; text: string; log: string }
  | { do: "send_binary"; bytes: Uint8Array }
  | { do: "redraw" }
  | { do: "start_mic" }
  | { do: "stop_mic" }
  | { do: "play"; rate: number; samples: Int16Array }
  | { do: "stop_playback" }
  | { do: "volume"; percent: number }
  | { do: "brightness"; percent: number }
  | { do: "store_key"; /** base64 */ key: string }
  | { do: "invoke"; id: string; name: string; args: unknown }
  | { do: "confirm_firmware" | "rollback" | "restart" };

export type Screen =
  | "boot"
  | "offline"
  | "connecting"
  | "setup"
  | "pairing"
  | "ready"
  | "listening"
  | "thinking"
  | "responding"
  | "card"
  | "image"
  | "prompt"
  | "updating";

/** What the screen shows, and the state around it. */
export interface View {
  screen: Screen;
  status: string;
  title: string | null;
  /** The text area's page. */
  lines: string[];
  page: number;
  pages: number;
  notice: string | null;
  /** The picture, RGB565 little-endian, row-major. */
  image: { width: number; height: number; rgb565: Uint8Array } | null;
  /** On a question: from when a press answers. */
  answers_from: Millis | null;
  phase: "boot" | "offline" | "connecting" | "handshake" | "online";
  mode: "idle" | "listening" | "thinking" | "responding";
  paired: boolean;
  /** Why the server refused the device (`auth_failed`, `bad_token`, `protocol`). */
  setup_needed: string | null;
  volume: number;
  device_id: string;
}

export interface Board {
  width: number;
  height: number;
  text_cols: number;
  text_rows: number;
  image: { width: number; height: number };
  mic_rate: number;
  speaker_rate: number;
}

export type Button = "talk" | "cancel" | "up" | "down";

interface Exports {
  memory: WebAssembly.Memory;
  herald_input(len: number): number;
  herald_output(): number;
  herald_bulk(): number;
  herald_bulk_len(): number;
  herald_board(): number;
  herald_boot(now: Millis): number;
  herald_connected(now: Millis): void;
  herald_closed(code: number, now: Millis): void;
  herald_text(now: Millis): void;
  herald_binary(now: Millis): void;
  herald_mic(now: Millis): void;
  herald_button(down: number, now: Millis): number;
  herald_timeout(now: Millis): void;
  herald_deadline(): Millis;
  herald_action(): number;
  herald_view(): number;
  herald_send_text(now: Millis): number;
  herald_register_action(): number;
  herald_complete_action(): number;
}

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder();

export class DeviceCore {
  private constructor(private readonly m: Exports) {}

  /** The module from its bytes (a page fetches device.wasm; a test reads the file). */
  static async load(bytes: BufferSource): Promise<DeviceCore> {
    let memory: WebAssembly.Memory | undefined;
    const imports = {
      herald: {
        random(ptr: number, len: number): void {
          // Never a key from unfilled memory.
          if (!memory) throw new Error("random bytes asked for before the module started");
          crypto.getRandomValues(new Uint8Array(memory.buffer, ptr, len));
        },
      },
    };
    const { instance } = await WebAssembly.instantiate(bytes, imports);
    const m = instance.exports as unknown as Exports;
    memory = m.memory;
    return new DeviceCore(m);
  }

  board(): Board {
    return this.json(this.m.herald_board()) as Board;
  }

  /** Boot the device: its id, or why the settings cannot be used. */
  boot(settings: { name: string; token: string | undefined; key: string | undefined }, now: Millis): { device_id: string } | { error: string } {
    this.input(JSON.stringify(settings));
    return this.json(this.m.herald_boot(now)) as { device_id: string } | { error: string };
  }

  connected(now: Millis): void {
    this.m.herald_connected(now);
  }

  /** The connection ended without the core asking; `code` when a close frame came. */
  closed(code: number | undefined, reason: string, now: Millis): void {
    this.input(reason);
    this.m.herald_closed(code ?? -1, now);
  }

  text(text: string, now: Millis): void {
    this.input(text);
    this.m.herald_text(now);
  }

  binary(bytes: Uint8Array, now: Millis): void {
    this.input(bytes);
    this.m.herald_binary(now);
  }

  /** Microphone samples at the board's rate. */
  mic(samples: Int16Array, now: Millis): void {
    this.input(new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength));
    this.m.herald_mic(now);
  }

  button(button: Button, down: boolean, now: Millis): void {
    this.input(button);
    this.m.herald_button(down ? 1 : 0, now);
  }

  timeout(now: Millis): void {
    this.m.herald_timeout(now);
  }

  /** When `timeout` is due next, if ever. */
  deadline(): Millis | undefined {
    const at = this.m.herald_deadline();
    return at < 0 ? undefined : at;
  }

  /** The next thing to do, if any. */
  action(): Action | undefined {
    const len = this.m.herald_action();
    if (len === 0) return undefined;
    const action = this.json(len) as { do: string } & Record<string, unknown>;
    if (action.do === "send_binary") return { do: "send_binary", bytes: this.bulk() };
    if (action.do === "play") {
      const bytes = this.bulk();
      const samples = new Int16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 1);
      return { do: "play", rate: action["rate"] as number, samples };
    }
    return action as Action;
  }

  view(): View {
    const view = this.json(this.m.herald_view()) as Omit<View, "image"> & { image: { width: number; height: number } | null };
    return { ...view, image: view.image ? { ...view.image, rgb565: this.bulk() } : null };
  }

  /** Type a message to the agent: why not, or undefined once sent. */
  sendText(text: string, now: Millis): string | undefined {
    this.input(text);
    return this.answerText(this.m.herald_send_text(now));
  }

  /** Add an action of the page's own, for the next `hello`: why not, or undefined. */
  registerAction(spec: { name: string; description?: string; params?: unknown }): string | undefined {
    this.input(JSON.stringify(spec));
    return this.answerText(this.m.herald_register_action());
  }

  /** Answer an invoked action with its result or what went wrong. */
  completeAction(id: string, outcome: { result: unknown } | { error: string }): string | undefined {
    this.input(JSON.stringify({ id, ...outcome }));
    return this.answerText(this.m.herald_complete_action());
  }

  private input(data: string | Uint8Array): void {
    const bytes = typeof data === "string" ? utf8.encode(data) : data;
    const at = this.m.herald_input(bytes.length);
    new Uint8Array(this.m.memory.buffer, at, bytes.length).set(bytes);
  }

  private output(len: number): string {
    return fromUtf8.decode(new Uint8Array(this.m.memory.buffer, this.m.herald_output(), len));
  }

  private json(len: number): unknown {
    return JSON.parse(this.output(len));
  }

  private answerText(len: number): string | undefined {
    return len === 0 ? undefined : this.output(len);
  }

  /** A copy of the bulk buffer: the module's memory may move with the next call. */
  private bulk(): Uint8Array {
    return new Uint8Array(this.m.memory.buffer, this.m.herald_bulk(), this.m.herald_bulk_len()).slice();
  }
}
