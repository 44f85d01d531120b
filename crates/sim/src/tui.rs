//! Interactive mode: the board in a terminal.
//!
//! The screen is drawn as the device draws it: the status line, the title, the text area
//! at the board's `text_cols` × `text_rows`, the notice, and images with half-block
//! characters (`▀`: the upper pixel in the foreground colour, the lower one in the
//! background), scaled to fit the terminal. Below it, what the board does beside its screen
//! (connection, LED, volume, the last event) and the keys.
//!
//! Keys stand for the buttons. Most terminals report key presses but not releases, so TALK
//! toggles: SPACE starts talking and SPACE again stops, and the repeats of a held SPACE
//! are ignored. A terminal that reports releases (the kitty keyboard protocol) gets real
//! push-to-talk: hold SPACE. Raw mode and the alternate screen are undone on every way
//! out, a panic included.

use std::io::Write;
use std::time::Duration;

use crossterm::cursor::{Hide, MoveTo, Show};
use crossterm::event::{
    Event, EventStream, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, KeyboardEnhancementFlags,
    PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use crossterm::style::{
    Attribute, Color, Print, ResetColor, SetAttribute, SetBackgroundColor, SetForegroundColor,
};
use crossterm::terminal::{self, Clear, ClearType, EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::{execute, queue};
use futures_util::StreamExt;
use herald_device::{Button, Image};
use herald_gadget_proto::limits::{MAX_TEXT, SESSION_NEW_HOLD_MS};

use super::boards::Board;
use super::render::image_label;
use super::runner::{Command, Handle, Snapshot};
use super::script::{self, Line};

const KEYS: &str = "SPACE talk · ESC/c cancel · ↑↓ page · ENTER type · n new conversation · q quit";
/// Without release events, SPACE events closer together than this are a held key repeating.
const REPEAT_GAP: Duration = Duration::from_millis(600);
/// Rows around the screen: header, borders, status, title, notice, and the lines below.
const CHROME_ROWS: u16 = 11;

pub async fn run(handle: &Handle, board: Board, script: Option<Vec<Line>>) -> anyhow::Result<()> {
    let terminal = Terminal::enter()?;
    let mut keys = EventStream::new();
    let mut snapshot = handle.snapshot();
    let mut ui = Ui {
        handle,
        releases: terminal.releases,
        typing: None,
        talking: false,
        last_space: None,
        message: None,
    };
    let scripted = script.is_some();
    let script_run = async {
        match script {
            Some(lines) => script::run(handle, lines).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(script_run);
    let mut script_result = None;
    loop {
        draw(&snapshot.borrow_and_update(), &ui, board)?;
        tokio::select! {
            changed = snapshot.changed() => {
                if changed.is_err() {
                    break;
                }
            }
            event = keys.next() => match event {
                Some(Ok(Event::Key(key))) => {
                    if ui.on_key(key).await == Flow::Quit {
                        break;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.into()),
                None => break,
            },
            result = &mut script_run, if scripted && script_result.is_none() => {
                ui.message = Some(match &result {
                    Ok(()) => "script finished; q quits".to_owned(),
                    Err(e) => format!("script failed: {e:#}"),
                });
                script_result = Some(result);
            }
        }
    }
    drop(terminal);
    script_result.unwrap_or(Ok(()))
}

#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Go,
    Quit,
}

struct Ui<'a> {
    handle: &'a Handle,
    /// The terminal reports key releases.
    releases: bool,
    /// The message being typed.
    typing: Option<String>,
    /// TALK is held down by the SPACE toggle.
    talking: bool,
    last_space: Option<std::time::Instant>,
    /// What the last key did wrong, or the script's end.
    message: Option<String>,
}

impl Ui<'_> {
    async fn on_key(&mut self, key: KeyEvent) -> Flow {
        if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
            return Flow::Quit;
        }
        if key.code == KeyCode::Char(' ') && self.typing.is_none() {
            self.talk(key.kind).await;
            return Flow::Go;
        }
        if key.kind == KeyEventKind::Release {
            return Flow::Go;
        }
        if let Some(typed) = self.typing.as_mut() {
            match key.code {
                KeyCode::Char(c) if typed.chars().count() < MAX_TEXT => typed.push(c),
                KeyCode::Backspace => {
                    typed.pop();
                }
                KeyCode::Esc => self.typing = None,
                KeyCode::Enter => {
                    let text = self.typing.take().unwrap_or_default();
                    self.command(Command::Text(text)).await;
                }
                _ => {}
            }
            return Flow::Go;
        }
        if key.kind == KeyEventKind::Repeat {
            return Flow::Go;
        }
        match key.code {
            KeyCode::Char('q') => return Flow::Quit,
            KeyCode::Esc | KeyCode::Char('c') => self.tap(Button::Cancel).await,
            KeyCode::Up => self.tap(Button::Up).await,
            KeyCode::Down => self.tap(Button::Down).await,
            KeyCode::Enter | KeyCode::Char('t') => self.typing = Some(String::new()),
            KeyCode::Char('n') => {
                // Holding CANCEL starts a new conversation; the release comes later.
                let handle = self.handle.clone();
                tokio::spawn(async move {
                    let hold = Duration::from_millis(SESSION_NEW_HOLD_MS + 200);
                    if handle.run(Command::Press(Button::Cancel)).await.is_ok() {
                        tokio::time::sleep(hold).await;
                        let _ = handle.run(Command::Release(Button::Cancel)).await;
                    }
                });
            }
            _ => {}
        }
        Flow::Go
    }

    async fn talk(&mut self, kind: KeyEventKind) {
        if self.releases {
            match kind {
                KeyEventKind::Press => self.command(Command::Press(Button::Talk)).await,
                KeyEventKind::Release => self.command(Command::Release(Button::Talk)).await,
                KeyEventKind::Repeat => {}
            }
            return;
        }
        let now = std::time::Instant::now();
        let repeat = self
            .last_space
            .is_some_and(|at| now.duration_since(at) < REPEAT_GAP);
        self.last_space = Some(now);
        if repeat {
            return;
        }
        if self.talking {
            self.talking = false;
            self.command(Command::Release(Button::Talk)).await;
            return;
        }
        self.command(Command::Press(Button::Talk)).await;
        // A press that did not start a recording (a prompt's yes, say) is over at once.
        if self.handle.snapshot().borrow().recording {
            self.talking = true;
        } else {
            self.command(Command::Release(Button::Talk)).await;
        }
    }

    async fn tap(&mut self, button: Button) {
        self.command(Command::Press(button)).await;
        self.command(Command::Release(button)).await;
    }

    async fn command(&mut self, command: Command) {
        self.message = self.handle.run(command).await.err();
    }
}

/// Raw mode and the alternate screen, undone on drop and on panic.
struct Terminal {
    releases: bool,
}

impl Terminal {
    fn enter() -> std::io::Result<Terminal> {
        terminal::enable_raw_mode()?;
        let releases = matches!(terminal::supports_keyboard_enhancement(), Ok(true));
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore(releases);
            previous(info);
        }));
        let mut out = std::io::stdout();
        execute!(out, EnterAlternateScreen, Hide)?;
        if releases {
            execute!(
                out,
                PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::REPORT_EVENT_TYPES)
            )?;
        }
        Ok(Terminal { releases })
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        restore(self.releases);
        // The hook that restores the terminal has nothing left to restore.
        drop(std::panic::take_hook());
    }
}

fn restore(releases: bool) {
    let mut out = std::io::stdout();
    if releases {
        let _ = execute!(out, PopKeyboardEnhancementFlags);
    }
    let _ = execute!(out, ResetColor, Show, LeaveAlternateScreen);
    let _ = terminal::disable_raw_mode();
}

/// Draws the whole frame.
fn draw(snapshot: &Snapshot, ui: &Ui<'_>, board: Board) -> std::io::Result<()> {
    let (term_cols, term_rows) = terminal::size()?;
    let config = ui.handle.config();
    let (cols, rows, width, height) = config.display.as_ref().map_or((32, 4, 0, 0), |d| {
        (
            usize::from(d.text_cols),
            usize::from(d.text_rows),
            d.width,
            d.height,
        )
    });
    let shown = &snapshot.shown;
    let image = shown.image.as_deref().map(|image| {
        let room_rows = term_rows.saturating_sub(CHROME_ROWS).max(1);
        let size = fit(image, term_cols.saturating_sub(2).max(1), room_rows);
        (image, size)
    });
    let inner = match image {
        Some((_, (w, _))) => usize::from(w).max(cols),
        None => cols,
    };
    let (top, bottom) = if board.is_round() {
        (('╭', '╮'), ('╰', '╯'))
    } else {
        (('┌', '┐'), ('└', '┘'))
    };

    let mut canvas = Canvas {
        out: std::io::BufWriter::new(std::io::stdout().lock()),
        row: 0,
        width: usize::from(term_cols),
        inner,
    };
    queue!(canvas.out, Clear(ClearType::All))?;
    canvas.line(&format!(
        "{} · {} {width}×{height} · {} · firmware {}",
        config.name, config.board, snapshot.device_id, snapshot.firmware
    ))?;
    canvas.line(&format!("{}{}{}", top.0, "─".repeat(inner), top.1))?;
    let screen_name = format!("[{}]", shown.screen.name());
    let status_room = inner.saturating_sub(screen_name.chars().count() + 1);
    let status = format!(
        "{:<status_room$} {screen_name}",
        clip(&shown.status, status_room)
    );
    canvas.framed(&status, Attribute::Reverse)?;
    if let Some((image, (w, h))) = image {
        for cell_row in 0..h.div_ceil(2) {
            canvas.start_row()?;
            queue!(canvas.out, Print("│"))?;
            draw_cells(&mut canvas.out, image, (w, h), cell_row)?;
            let pad = " ".repeat(inner - usize::from(w));
            queue!(canvas.out, ResetColor, Print(pad), Print("│"))?;
        }
        canvas.framed(&image_label(image), Attribute::Dim)?;
    } else {
        canvas.framed(shown.title.as_deref().unwrap_or(""), Attribute::Bold)?;
        for i in 0..rows {
            let text = shown.lines.get(i).map_or("", String::as_str);
            canvas.framed(text, Attribute::Reset)?;
        }
    }
    let page = if shown.pages > 1 {
        format!("page {}/{} ", shown.page + 1, shown.pages)
    } else {
        String::new()
    };
    let notice = format!("{page}{}", shown.notice.as_deref().unwrap_or(""));
    canvas.framed(&notice, Attribute::Italic)?;
    canvas.line(&format!("{}{}{}", bottom.0, "─".repeat(inner), bottom.1))?;

    let mut state = vec![
        snapshot.phase.name().to_owned(),
        if snapshot.paired {
            "paired"
        } else {
            "not paired"
        }
        .to_owned(),
    ];
    if config.speaker_rate.is_some() {
        state.push(format!("volume {}%", snapshot.volume));
    }
    state.push(format!("brightness {}%", snapshot.brightness));
    if let Some(led) = &snapshot.led {
        state.push(format!("LED {led}"));
    }
    if snapshot.recording {
        state.push("MIC ON".to_owned());
    }
    canvas.line(&state.join(" · "))?;
    canvas.line(snapshot.note.as_deref().unwrap_or(""))?;
    match &ui.typing {
        Some(typed) => canvas.line(&format!("message> {typed}_   (ENTER sends, ESC drops)"))?,
        None => canvas.line(ui.message.as_deref().unwrap_or(""))?,
    }
    let talk = if ui.releases {
        "hold SPACE talk"
    } else {
        "SPACE talk on/off"
    };
    canvas.line(&KEYS.replacen("SPACE talk", talk, 1))?;
    canvas.out.flush()
}

/// The terminal being drawn, a row at a time.
struct Canvas<W: Write> {
    out: W,
    row: u16,
    /// Columns of the terminal.
    width: usize,
    /// Columns inside the screen's frame.
    inner: usize,
}

impl<W: Write> Canvas<W> {
    fn start_row(&mut self) -> std::io::Result<()> {
        queue!(self.out, MoveTo(0, self.row))?;
        self.row = self.row.saturating_add(1);
        Ok(())
    }

    /// A line outside the frame, cut to the terminal's width.
    fn line(&mut self, text: &str) -> std::io::Result<()> {
        self.start_row()?;
        queue!(self.out, Print(clip(text, self.width)))
    }

    /// A line inside the frame, padded to its width.
    fn framed(&mut self, text: &str, attribute: Attribute) -> std::io::Result<()> {
        let text = clip(text, self.inner);
        let pad = " ".repeat(self.inner - text.chars().count());
        self.start_row()?;
        queue!(self.out, Print("│"), SetAttribute(attribute), Print(text))?;
        queue!(
            self.out,
            SetAttribute(Attribute::Reset),
            Print(pad),
            Print("│")
        )
    }
}

/// The image's size in pixels once scaled, never enlarged, to fit `cols` × `rows` cells
/// of one pixel across and two down.
fn fit(image: &Image, cols: u16, rows: u16) -> (u16, u16) {
    let (w, h) = (f64::from(image.width()), f64::from(image.height()));
    let scale = (f64::from(cols) / w)
        .min(f64::from(rows) * 2.0 / h)
        .min(1.0);
    let scaled = |n: f64| (n * scale).round().clamp(1.0, f64::from(u16::MAX)) as u16;
    (scaled(w), scaled(h))
}

/// One row of cells: pixel rows `2 * cell_row` and the one below, nearest neighbour.
fn draw_cells(
    out: &mut impl Write,
    image: &Image,
    (w, h): (u16, u16),
    cell_row: u16,
) -> std::io::Result<()> {
    let source = |x: u16, y: u16| {
        let sx = u32::from(x) * image.width() / u32::from(w);
        let sy = u32::from(y) * image.height() / u32::from(h);
        rgb(image.pixel(sx, sy).unwrap_or(0))
    };
    for x in 0..w {
        let upper = source(x, cell_row * 2);
        let lower = (cell_row * 2 + 1 < h).then(|| source(x, cell_row * 2 + 1));
        queue!(out, SetForegroundColor(upper))?;
        match lower {
            Some(lower) => queue!(out, SetBackgroundColor(lower))?,
            None => queue!(out, SetBackgroundColor(Color::Reset))?,
        }
        queue!(out, Print('▀'))?;
    }
    Ok(())
}

/// An RGB565 pixel as a terminal colour, each channel widened to 8 bits.
fn rgb(pixel: u16) -> Color {
    let (r, g, b) = (pixel >> 11, (pixel >> 5) & 0x3f, pixel & 0x1f);
    Color::Rgb {
        r: ((r << 3) | (r >> 2)) as u8,
        g: ((g << 2) | (g >> 4)) as u8,
        b: ((b << 3) | (b >> 2)) as u8,
    }
}

/// At most `n` characters of `text`.
fn clip(text: &str, n: usize) -> &str {
    text.char_indices()
        .nth(n)
        .map_or(text, |(at, _)| &text[..at])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_shrink_to_the_terminal_and_keep_their_shape() {
        let image = Image::new(320, 240, vec![]);
        // 80 columns and 20 rows hold 80 × 40 half-block pixels: the height decides.
        assert_eq!(fit(&image, 80, 20), (53, 40));
        assert_eq!(fit(&image, 40, 100), (40, 30));
        // Never enlarged.
        assert_eq!(fit(&Image::new(10, 6, vec![]), 200, 100), (10, 6));
        // Never empty.
        assert_eq!(fit(&Image::new(1000, 1, vec![]), 10, 10), (10, 1));
    }

    #[test]
    fn rgb565_widens_to_full_range() {
        assert_eq!(rgb(0xF800), Color::Rgb { r: 255, g: 0, b: 0 });
        assert_eq!(rgb(0x07E0), Color::Rgb { r: 0, g: 255, b: 0 });
        assert_eq!(rgb(0x001F), Color::Rgb { r: 0, g: 0, b: 255 });
        assert_eq!(
            rgb(0xFFFF),
            Color::Rgb {
                r: 255,
                g: 255,
                b: 255
            }
        );
        assert_eq!(rgb(0), Color::Rgb { r: 0, g: 0, b: 0 });
    }

    #[test]
    fn half_blocks_pair_two_pixel_rows() {
        // 1×3: red over green, then blue over the terminal's background.
        let image = Image::new(1, 3, vec![0x00, 0xf8, 0xe0, 0x07, 0x1f, 0x00]);
        let mut first = Vec::new();
        draw_cells(&mut first, &image, (1, 3), 0).unwrap();
        let mut expected = Vec::new();
        queue!(
            expected,
            SetForegroundColor(rgb(0xF800)),
            SetBackgroundColor(rgb(0x07E0)),
            Print('▀')
        )
        .unwrap();
        assert_eq!(first, expected);
        let mut last = Vec::new();
        draw_cells(&mut last, &image, (1, 3), 1).unwrap();
        let mut expected = Vec::new();
        queue!(
            expected,
            SetForegroundColor(rgb(0x001F)),
            SetBackgroundColor(Color::Reset),
            Print('▀')
        )
        .unwrap();
        assert_eq!(last, expected);
    }

    #[test]
    fn clipping_counts_characters() {
        assert_eq!(clip("héllo", 2), "hé");
        assert_eq!(clip("hi", 5), "hi");
    }
}
