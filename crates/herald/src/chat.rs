//! `herald chat`: a terminal phone app, built on `herald-mobile-client`.
//!
//! Lines typed are sent as messages; replies stream in place (on a terminal), cards are
//! answered by number, `/send FILE [CAPTION]` uploads a file, files from the agent are
//! saved to a folder and named. When standard input ends (a script), the client waits
//! for the conversation to go quiet, then exits.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use herald_mobile_client::{media_frames, Backoff, Client, ClientConfig, Event};
use herald_mobile_proto::{
    decode_base64, ClientFrame, DeviceInfo, MediaDown, MediaKind, PromptAnswer, PromptCard,
    ServerFrame, Text, CLARIFY_OTHER,
};
use tokio::io::{AsyncBufReadExt, BufReader};

/// After input ends, exit once nothing has arrived for this long.
const QUIET: Duration = Duration::from_secs(3);

pub struct ChatArgs {
    pub url: String,
    pub token: String,
    pub device_id: String,
    /// Where received files are saved, private to this user.
    pub downloads: PathBuf,
}

/// What the terminal shows and remembers.
struct Screen {
    tty: bool,
    /// Text of messages still arriving, by id (chunks joined, edits applied).
    partial: HashMap<String, String>,
    /// The message being redrawn in place, on a terminal.
    live: Option<String>,
    /// The card a number answers, until it is answered.
    card: Option<PromptCard>,
    /// The last card shown, so its answer is told by the choice's label.
    last_card: Option<PromptCard>,
    /// The user picked "other" and the next line is their answer.
    other_for: Option<String>,
    downloads: PathBuf,
    files: HashMap<String, Vec<u8>>,
    sent: u64,
}

pub fn run(args: ChatArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let result = runtime.block_on(chat(args));
    // The stdin reader sits in a blocking read that only a new line would end: do not
    // wait for it, or an error would hang until the user pressed Enter.
    runtime.shutdown_background();
    result
}

async fn chat(args: ChatArgs) -> anyhow::Result<()> {
    let mut client = Client::spawn(ClientConfig {
        url: args.url.clone(),
        token: args.token,
        device: DeviceInfo {
            id: args.device_id,
            name: Some("herald chat".into()),
            platform: Some("terminal".into()),
        },
        backoff: Backoff::default(),
    });
    let mut screen = Screen {
        tty: std::io::stdout().is_terminal(),
        partial: HashMap::new(),
        live: None,
        card: None,
        last_card: None,
        other_for: None,
        downloads: args.downloads,
        files: HashMap::new(),
        sent: 0,
    };
    println!(
        "Connecting to {} ... (type a message; /send FILE; /quit)",
        args.url
    );
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut input_open = true;
    loop {
        let quiet = tokio::time::sleep(QUIET);
        tokio::select! {
            line = lines.next_line(), if input_open => match line? {
                Some(line) => {
                    if !screen.input(&client, line.trim()).await? {
                        return Ok(());
                    }
                }
                None => input_open = false,
            },
            event = client.next_event() => match event {
                Some(event) => screen.event(event)?,
                None => return Ok(()),
            },
            _ = quiet, if !input_open => return Ok(()),
        }
    }
}

impl Screen {
    /// Handle a typed line; false to quit.
    async fn input(&mut self, client: &Client, line: &str) -> anyhow::Result<bool> {
        if line.is_empty() {
            return Ok(true);
        }
        if line == "/quit" {
            return Ok(false);
        }
        if let Some(prompt_id) = self.other_for.take() {
            answer(
                client,
                prompt_id,
                Some(CLARIFY_OTHER.into()),
                Some(line.into()),
            )
            .await?;
            return Ok(true);
        }
        if let (Some(card), Ok(n)) = (&self.card, line.parse::<usize>()) {
            let Some(option) = n.checked_sub(1).and_then(|i| card.options.get(i)) else {
                println!("Pick 1 to {}.", card.options.len());
                return Ok(true);
            };
            if option.id == CLARIFY_OTHER {
                println!("Your answer:");
                self.other_for = Some(card.id.clone());
            } else {
                answer(client, card.id.clone(), Some(option.id.clone()), None).await?;
            }
            self.card = None;
            return Ok(true);
        }
        self.sent += 1;
        let id = format!("chat-{}-{}", std::process::id(), self.sent);
        if let Some(rest) = line.strip_prefix("/send ") {
            let (file, caption) = match rest.split_once(' ') {
                Some((file, caption)) => (file, Some(caption.to_owned())),
                None => (rest, None),
            };
            if let Err(err) = send_file(client, &id, Path::new(file), caption).await {
                println!("! {err:#}");
            }
            return Ok(true);
        }
        let text = ClientFrame::Text(Text {
            id,
            text: line.to_owned(),
            reply_to: None,
        });
        client.send(text).await?;
        Ok(true)
    }

    fn event(&mut self, event: Event) -> anyhow::Result<()> {
        match event {
            Event::Connected { session } => println!("Connected ({session})."),
            Event::Disconnected { reason, retry_in } => {
                self.end_live();
                println!("Connection lost ({reason}); retrying in {retry_in:?}.");
            }
            Event::Denied { reason } => {
                self.end_live();
                bail!("access denied: {reason}");
            }
            Event::Failed { reason } => {
                self.end_live();
                bail!("{reason}");
            }
            Event::Frame(frame) => self.frame(frame)?,
        }
        Ok(())
    }

    fn frame(&mut self, frame: ServerFrame) -> anyhow::Result<()> {
        match frame {
            ServerFrame::Message(m) => {
                let text = self.partial.entry(m.id.clone()).or_default();
                if m.edit {
                    *text = m.text;
                } else {
                    text.push_str(&m.text);
                }
                let shown = text.clone();
                if m.final_ {
                    self.partial.remove(&m.id);
                    if self.live.as_deref() == Some(m.id.as_str()) {
                        self.redraw(&shown);
                        self.end_live();
                    } else {
                        self.end_live();
                        println!("< {shown}");
                    }
                } else if m.edit && self.tty {
                    self.live = Some(m.id);
                    self.redraw(&shown);
                }
            }
            ServerFrame::Prompt(card) => {
                self.end_live();
                println!("? {}", card.text);
                if let Some(command) = &card.command {
                    println!("  command: {command}");
                }
                for (n, option) in card.options.iter().enumerate() {
                    println!("  {}. {}", n + 1, option.label);
                }
                self.card = Some(card.clone());
                self.last_card = Some(card);
            }
            ServerFrame::PromptDone {
                prompt_id,
                option_id,
                expired,
            } => {
                if expired {
                    println!("(the question expired)");
                    self.card = None;
                } else if let Some(choice) = option_id {
                    let label = self
                        .last_card
                        .as_ref()
                        .filter(|card| card.id == prompt_id)
                        .and_then(|card| card.options.iter().find(|o| o.id == choice))
                        .map_or(choice.as_str(), |option| option.label.as_str());
                    println!("(answered: {label})");
                }
            }
            ServerFrame::Media(media) => self.media(media)?,
            ServerFrame::Error { code, message } => {
                self.end_live();
                println!("! {}: {message}", code.as_str());
            }
            // Typing, avatar and pong are visible in a real app; a terminal skips them.
            _ => {}
        }
        Ok(())
    }

    fn media(&mut self, media: MediaDown) -> anyhow::Result<()> {
        let Some(data) = &media.data else {
            if let Some(url) = &media.url {
                println!("< [{}] {url}", media.kind.as_str());
            }
            return Ok(());
        };
        let bytes = decode_base64(data).context("a file from the agent is not base64")?;
        self.files
            .entry(media.id.clone())
            .or_default()
            .extend(bytes);
        if !media.final_ {
            return Ok(());
        }
        let bytes = self.files.remove(&media.id).unwrap_or_default();
        let name = media
            .filename
            .as_deref()
            .and_then(|n| Path::new(n).file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| format!("{}.bin", media.id));
        herald_files::create_private_dir(&self.downloads)?;
        let path = self.downloads.join(name);
        herald_files::write_private(&path, &bytes)?;
        let caption = media.caption.map(|c| format!(" {c}")).unwrap_or_default();
        println!(
            "< [{} {} bytes]{caption} saved to {}",
            media.kind.as_str(),
            bytes.len(),
            path.display()
        );
        Ok(())
    }

    fn redraw(&self, text: &str) {
        // Only the last line can be redrawn in place.
        let last = text.lines().last().unwrap_or("");
        print!("\r\x1b[2K< {last}");
        let _ = std::io::stdout().flush();
    }

    fn end_live(&mut self) {
        if self.live.take().is_some() {
            println!();
        }
    }
}

async fn answer(
    client: &Client,
    prompt_id: String,
    option_id: Option<String>,
    text: Option<String>,
) -> anyhow::Result<()> {
    let frame = ClientFrame::Prompt(PromptAnswer {
        prompt_id,
        option_id,
        text,
    });
    client.send(frame).await?;
    Ok(())
}

async fn send_file(
    client: &Client,
    id: &str,
    path: &Path,
    caption: Option<String>,
) -> anyhow::Result<()> {
    let bytes = tokio::fs::read(path)
        .await
        .with_context(|| format!("cannot read {}", path.display()))?;
    let extension = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let kind = match extension.as_str() {
        "png" | "jpg" | "jpeg" | "gif" | "webp" => MediaKind::Image,
        "mp4" | "mov" | "webm" => MediaKind::Video,
        "wav" | "mp3" | "ogg" | "flac" | "m4a" => MediaKind::Audio,
        _ => MediaKind::Document,
    };
    let filename = path.file_name().map(|n| n.to_string_lossy().into_owned());
    for frame in media_frames(id, kind, None, filename, caption, &bytes) {
        client.send(frame).await?;
    }
    println!("(sent {} bytes)", bytes.len());
    Ok(())
}
