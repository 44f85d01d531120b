// Draws the device core's view on a canvas the size of its screen, as a display driver
// would: a status bar, the text area's page in a fixed-width font, a notice strip at
// the bottom, a question's two answers, and RGB565 pictures pixel for pixel.

import type { Board, View } from "./core.js";

/** A view as drawn: the core's, with what only the page knows. */
export interface Drawn extends View {
  /** On a question: whether presses answer yet. */
  armed: boolean;
  /** While listening: the microphone's level, 0..1. */
  level: number | undefined;
}

const BAR = 22;
const ROW = 24;
const FONT = "20px 'DejaVu Sans Mono', 'Menlo', 'Consolas', monospace";
const SMALL = "15px 'DejaVu Sans Mono', 'Menlo', 'Consolas', monospace";

const COLORS = {
  background: "#0b1020",
  text: "#e8ecf4",
  bar: "#1d2a4a",
  barText: "#cdd6ea",
  accent: "#ffd166",
  notice: "#3a2f0b",
  noticeText: "#ffe8a3",
  yes: "#2f9e44",
  no: "#c92a2a",
  dim: "#6b7896",
};

/** The bar's colour says where the device stands. */
const BAR_COLORS: Partial<Record<View["screen"], string>> = {
  offline: "#5c1f1f",
  setup: "#7a2e00",
  pairing: "#4a3b00",
  listening: "#7a1f4a",
  thinking: "#263d73",
  responding: "#1e5a45",
  prompt: "#5a3d00",
};

export class ScreenPainter {
  private readonly ctx: CanvasRenderingContext2D;

  constructor(
    private readonly canvas: HTMLCanvasElement,
    private readonly board: Board,
  ) {
    canvas.width = board.width;
    canvas.height = board.height;
    const ctx = canvas.getContext("2d");
    if (!ctx) throw new Error("no 2D canvas");
    this.ctx = ctx;
  }

  paint(view: Drawn): void {
    const { ctx } = this;
    const { width, height } = this.board;
    ctx.fillStyle = COLORS.background;
    ctx.fillRect(0, 0, width, height);
    this.bar(view);
    if (view.image) {
      const img = view.image;
      const box = this.board.image;
      const x = Math.floor((box.width - img.width) / 2);
      const y = BAR + Math.floor((box.height - img.height) / 2);
      ctx.putImageData(new ImageData(rgb565ToRgba(img.rgb565, img.width, img.height), img.width, img.height), x, y);
    } else {
      this.text(view);
    }
    if (view.screen === "prompt") this.answers(view.armed);
    if (view.notice) this.notice(view.notice);
  }

  private bar(view: Drawn): void {
    const { ctx } = this;
    ctx.fillStyle = BAR_COLORS[view.screen] ?? COLORS.bar;
    ctx.fillRect(0, 0, this.board.width, BAR);
    ctx.font = SMALL;
    ctx.textBaseline = "middle";
    ctx.fillStyle = COLORS.barText;
    const label = view.title ? view.title : view.status;
    const pages = view.pages > 1 ? `${view.page + 1}/${view.pages}` : "";
    const room = Math.floor((this.board.width - 12 - (pages ? ctx.measureText(pages).width + 8 : 0)) / ctx.measureText("M").width);
    ctx.fillText(label.length > room ? `${label.slice(0, room - 1)}…` : label, 6, BAR / 2 + 1);
    if (view.level !== undefined) {
      // The microphone's level, on the right of the bar.
      const w = 80;
      ctx.fillStyle = "rgb(0 0 0 / 0.35)";
      ctx.fillRect(this.board.width - 6 - w, 7, w, BAR - 14);
      ctx.fillStyle = "#ff8fb1";
      ctx.fillRect(this.board.width - 6 - w, 7, Math.round(w * Math.min(1, view.level)), BAR - 14);
    }
    if (pages) {
      ctx.textAlign = "right";
      ctx.fillText(pages, this.board.width - 6, BAR / 2 + 1);
      ctx.textAlign = "left";
    }
  }

  private text(view: View): void {
    const { ctx } = this;
    ctx.font = FONT;
    ctx.textBaseline = "top";
    const last = view.lines.length - 1;
    if (view.screen === "card") {
      // A card stands out from the conversation by its edge.
      ctx.fillStyle = COLORS.accent;
      ctx.fillRect(0, BAR, 4, this.board.height - BAR);
    }
    ctx.fillStyle = COLORS.text;
    view.lines.forEach((line, i) => {
      // On a question the last row is the hint, which the answers below replace.
      if (view.screen === "prompt" && i === last) return;
      ctx.fillText(line, 9, BAR + 6 + i * ROW);
    });
  }

  private answers(armed: boolean): void {
    const { ctx } = this;
    const y = BAR + 6 + (this.board.text_rows - 1) * ROW - 2;
    const w = 130;
    const h = ROW;
    const draw = (x: number, color: string, label: string) => {
      ctx.fillStyle = armed ? color : COLORS.dim;
      ctx.fillRect(x, y, w, h);
      ctx.fillStyle = "#ffffff";
      ctx.font = SMALL;
      ctx.textBaseline = "middle";
      ctx.textAlign = "center";
      ctx.fillText(label, x + w / 2, y + h / 2 + 1);
      ctx.textAlign = "left";
    };
    draw(20, COLORS.yes, "TALK = yes");
    draw(this.board.width - 20 - w, COLORS.no, "CANCEL = no");
  }

  private notice(text: string): void {
    const { ctx } = this;
    const h = BAR;
    ctx.fillStyle = COLORS.notice;
    ctx.fillRect(0, this.board.height - h, this.board.width, h);
    ctx.font = SMALL;
    ctx.textBaseline = "middle";
    ctx.fillStyle = COLORS.noticeText;
    const room = Math.floor((this.board.width - 12) / ctx.measureText("M").width);
    ctx.fillText(text.length > room ? `${text.slice(0, room - 1)}…` : text, 6, this.board.height - h / 2 + 1);
  }
}

/** RGB565 little-endian pixels as the canvas's RGBA (each channel's top bits repeated
 * into its low ones, so white stays 255). */
export function rgb565ToRgba(data: Uint8Array, width: number, height: number): Uint8ClampedArray<ArrayBuffer> {
  const out = new Uint8ClampedArray(new ArrayBuffer(width * height * 4));
  for (let i = 0; i < width * height; i++) {
    const v = (data[2 * i] ?? 0) | ((data[2 * i + 1] ?? 0) << 8);
    const r = (v >> 11) & 0x1f;
    const g = (v >> 5) & 0x3f;
    const b = v & 0x1f;
    out[4 * i] = (r << 3) | (r >> 2);
    out[4 * i + 1] = (g << 2) | (g >> 4);
    out[4 * i + 2] = (b << 3) | (b >> 2);
    out[4 * i + 3] = 255;
  }
  return out;
}
