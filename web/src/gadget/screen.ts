// Draws the device's view on a canvas the size of its screen, as a display driver
// would: a status bar, the text area's page in a fixed-width font, a notice strip at
// the bottom, the pairing code in large letters, a question's two answers, and RGB565
// pictures pixel for pixel.

import { BOARD, type View } from "./device.js";

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

  constructor(private readonly canvas: HTMLCanvasElement) {
    canvas.width = BOARD.width;
    canvas.height = BOARD.height;
    const ctx = canvas.getContext("2d");
    if (!ctx) throw new Error("no 2D canvas");
    this.ctx = ctx;
  }

  paint(view: View): void {
    const { ctx } = this;
    const { width, height } = BOARD;
    ctx.fillStyle = COLORS.background;
    ctx.fillRect(0, 0, width, height);
    this.bar(view);
    if (view.image) {
      const img = view.image;
      const box = BOARD.image;
      const x = Math.floor((box.width - img.width) / 2);
      const y = BAR + Math.floor((box.height - img.height) / 2);
      ctx.putImageData(new ImageData(img.rgba, img.width, img.height), x, y);
    } else {
      this.text(view);
    }
    if (view.code) this.code(view.code);
    if (view.screen === "prompt") this.answers(view.armed === true);
    if (view.notice) this.notice(view.notice);
  }

  private bar(view: View): void {
    const { ctx } = this;
    ctx.fillStyle = BAR_COLORS[view.screen] ?? COLORS.bar;
    ctx.fillRect(0, 0, BOARD.width, BAR);
    ctx.font = SMALL;
    ctx.textBaseline = "middle";
    ctx.fillStyle = COLORS.barText;
    const label = view.title ? view.title : view.status;
    const pages = view.pages > 1 ? `${view.page + 1}/${view.pages}` : "";
    const room = Math.floor((BOARD.width - 12 - (pages ? ctx.measureText(pages).width + 8 : 0)) / ctx.measureText("M").width);
    ctx.fillText(label.length > room ? `${label.slice(0, room - 1)}…` : label, 6, BAR / 2 + 1);
    if (view.level !== undefined) {
      // The microphone's level, on the right of the bar.
      const w = 80;
      ctx.fillStyle = "rgb(0 0 0 / 0.35)";
      ctx.fillRect(BOARD.width - 6 - w, 7, w, BAR - 14);
      ctx.fillStyle = "#ff8fb1";
      ctx.fillRect(BOARD.width - 6 - w, 7, Math.round(w * Math.min(1, view.level)), BAR - 14);
    }
    if (pages) {
      ctx.textAlign = "right";
      ctx.fillText(pages, BOARD.width - 6, BAR / 2 + 1);
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
      ctx.fillRect(0, BAR, 4, BOARD.height - BAR);
    }
    ctx.fillStyle = COLORS.text;
    view.lines.forEach((line, i) => {
      // On a question the last row is the hint, which the answers below replace.
      if (view.screen === "prompt" && i === last) return;
      ctx.fillText(line, 9, BAR + 6 + i * ROW);
    });
  }

  private code(code: string): void {
    const { ctx } = this;
    ctx.font = "bold 40px 'DejaVu Sans Mono', 'Menlo', 'Consolas', monospace";
    ctx.textBaseline = "middle";
    ctx.textAlign = "center";
    ctx.fillStyle = COLORS.accent;
    ctx.fillText(code, BOARD.width / 2, BAR + 6 + 2.5 * ROW);
    ctx.textAlign = "left";
  }

  private answers(armed: boolean): void {
    const { ctx } = this;
    const y = BAR + 6 + (BOARD.textRows - 1) * ROW - 2;
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
    draw(BOARD.width - 20 - w, COLORS.no, "CANCEL = no");
  }

  private notice(text: string): void {
    const { ctx } = this;
    const h = BAR;
    ctx.fillStyle = COLORS.notice;
    ctx.fillRect(0, BOARD.height - h, BOARD.width, h);
    ctx.font = SMALL;
    ctx.textBaseline = "middle";
    ctx.fillStyle = COLORS.noticeText;
    const room = Math.floor((BOARD.width - 12) / ctx.measureText("M").width);
    ctx.fillText(text.length > room ? `${text.slice(0, room - 1)}…` : text, 6, BOARD.height - h / 2 + 1);
  }
}
