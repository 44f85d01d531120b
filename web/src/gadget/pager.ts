// Text laid out for a fixed grid of character cells, one page at a time, the way a
// gadget's text area shows it: words wrapped at `cols`, longer words cut, line breaks
// kept, `rows` lines a page.

/** `text` wrapped to lines of at most `cols` characters. */
export function wrap(text: string, cols: number): string[] {
  const lines: string[] = [];
  for (const paragraph of text.split("\n")) {
    let line = "";
    for (const word of paragraph.split(/[ \t]+/)) {
      if (!word) continue;
      let rest = [...word];
      // A word longer than a line is cut into full lines.
      while (rest.length > cols) {
        if (line) {
          lines.push(line);
          line = "";
        }
        lines.push(rest.slice(0, cols).join(""));
        rest = rest.slice(cols);
      }
      const piece = rest.join("");
      if (!piece) continue;
      if (!line) line = piece;
      else if ([...line].length + 1 + rest.length <= cols) line += ` ${piece}`;
      else {
        lines.push(line);
        line = piece;
      }
    }
    lines.push(line);
  }
  // Trailing empty lines show nothing.
  while (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
  return lines.length === 1 && lines[0] === "" ? [] : lines;
}

export class Pager {
  private lines: string[] = [];
  private pageNow = 0;

  constructor(
    readonly cols: number,
    readonly rows: number,
  ) {}

  /** New text, from its first page. */
  show(text: string): void {
    this.lines = wrap(text, this.cols);
    this.pageNow = 0;
  }

  /** The same text grown (a streaming reply): the page shown stays where it is. */
  update(text: string): void {
    this.lines = wrap(text, this.cols);
    this.pageNow = Math.min(this.pageNow, this.pages - 1);
  }

  clear(): void {
    this.show("");
  }

  get text(): string {
    return this.lines.join("\n");
  }

  get pages(): number {
    return Math.max(1, Math.ceil(this.lines.length / this.rows));
  }

  get page(): number {
    return this.pageNow;
  }

  current(): string[] {
    return this.lines.slice(this.pageNow * this.rows, (this.pageNow + 1) * this.rows);
  }

  /** Moves one page; false when there is none that way. */
  turn(down: boolean): boolean {
    const next = this.pageNow + (down ? 1 : -1);
    if (next < 0 || next >= this.pages) return false;
    this.pageNow = next;
    return true;
  }
}
