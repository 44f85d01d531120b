//! The built-in demo agent: deterministic, offline, and able to exercise every feature
//! of the conversation port, so a person, the simulator and the tests can try Herald
//! with no keys and no network.
//!
//! | message            | what happens                                                  |
//! |--------------------|---------------------------------------------------------------|
//! | any text           | status "Thinking", cumulative streaming, `You said: <text>`   |
//! | `/ask QUESTION`    | a yes/no question; the answer gives `You answered yes.`/`no.` |
//! | `/approve COMMAND` | an exec-approval question; the reply names the choice         |
//! | `/card TITLE | BODY` | a display card                                              |
//! | `/action NAME JSON`| calls the device action; `Result: <json>` or `Action failed: …`|
//! | `/slow`            | streams for 30 s, so `cancel` can be seen to stop it          |
//! | `/fail`            | "Thinking", then the turn fails (as a model error would)      |
//! | `/stall`           | a turn that never answers nor ends (as a hung model would)    |
//! | `/new`             | `Started a new conversation.`                                 |
//! | `/choose A, B, C`  | a clarify card (phones); the reply names the choice           |
//! | `/long`            | a reply longer than a phone's message limit, so it is chunked |
//! | `/media`, `/image` | a picture (1200×900, fitted to a gadget's screen)             |
//! | voice              | `I heard N.N seconds of audio.`, then the recording played back |
//! | a file             | `Got your <kind>: <caption>.`                                 |

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use herald_port::{
    Agent, Card, Chat, Choice, Command, DeliveryError, Inbound, InboundBody, Outbound, Outcome,
    Prompt, PromptAnswer, SendOptions, TurnId,
};
use tokio::task::AbortHandle;
use tracing::debug;

/// How long `/fail` thinks before it fails.
const FAIL_AFTER: Duration = Duration::from_secs(1);

/// Pause between streamed previews of an ordinary reply.
const STREAM_STEP: Duration = Duration::from_millis(40);
/// `/slow` streams this long, one preview per [`SLOW_STEP`].
const SLOW_TOTAL: Duration = Duration::from_secs(30);
const SLOW_STEP: Duration = Duration::from_millis(500);

/// What the demo agent is waiting to hear back about.
#[derive(Debug, Clone)]
enum Asked {
    YesNo,
    Approval { command: String },
    Choice { choices: Vec<String> },
}

/// The picture `/media` and `/image` send: 1200×900, larger than any gadget screen.
const DEMO_PICTURE: &[u8] = include_bytes!("../assets/test-pattern.png");
/// Sentences in the `/long` reply: well past any phone's message limit.
const LONG_SENTENCES: usize = 120;

#[derive(Default)]
struct ChatState {
    /// The running turn (its id and task), so `/stop` and a new message can end it.
    turn: Option<(TurnId, AbortHandle)>,
    asked: HashMap<String, Asked>,
}

pub struct DemoAgent {
    out: Arc<dyn Outbound>,
    chats: Arc<Mutex<HashMap<Chat, ChatState>>>,
    /// Where the picture is written for the length of a send (the port takes paths).
    scratch: PathBuf,
}

impl DemoAgent {
    /// A demo agent that writes its picture, for the length of a send, under the
    /// system's temporary directory.
    pub fn new(out: Arc<dyn Outbound>) -> Self {
        DemoAgent::with_scratch_dir(out, std::env::temp_dir())
    }

    /// A demo agent that writes its picture, for the length of a send, under `dir`
    /// (the server's data directory, say), in a private directory of its own.
    pub fn with_scratch_dir(out: Arc<dyn Outbound>, dir: impl Into<PathBuf>) -> Self {
        DemoAgent {
            out,
            chats: Arc::default(),
            scratch: dir.into(),
        }
    }

    fn with_chat<T>(&self, chat: &Chat, f: impl FnOnce(&mut ChatState) -> T) -> T {
        let mut chats = self.chats.lock().unwrap_or_else(|e| e.into_inner());
        f(chats.entry(chat.clone()).or_default())
    }

    /// Stop the running turn of `chat`, if any; returns whether one was running.
    async fn stop_turn(&self, chat: &Chat) -> bool {
        let running = self.with_chat(chat, |s| s.turn.take());
        match running {
            Some((id, task)) if !task.is_finished() => {
                task.abort();
                self.out.turn_ended(chat, id, Outcome::Cancelled).await;
                true
            }
            _ => false,
        }
    }

    /// Herald gave turn `turn_id` up (and ended it at the device): its work stops.
    fn give_up_turn(&self, chat: &Chat, turn_id: &TurnId) {
        let running = self.with_chat(chat, |s| s.turn.take_if(|(id, _)| id == turn_id));
        if let Some((_, task)) = running {
            task.abort();
        }
    }

    /// Run `work` as the chat's turn: turn start, then `work`, then turn end.
    async fn start_turn<F>(&self, chat: Chat, work: F)
    where
        F: std::future::Future<Output = Result<(), DeliveryError>> + Send + 'static,
    {
        self.stop_turn(&chat).await;
        let turn_id = TurnId::next();
        self.out.turn_started(&chat, turn_id.clone()).await;
        let out = self.out.clone();
        let chats = self.chats.clone();
        let key = chat.clone();
        let id = turn_id.clone();
        let task = tokio::spawn(async move {
            let outcome = match work.await {
                Ok(()) => Outcome::Success,
                Err(err) => {
                    debug!(%err, "demo turn failed");
                    Outcome::Failure
                }
            };
            // Forget the handle first, so a late `/stop` does not end the turn twice.
            if let Some(state) = chats
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_mut(&key)
            {
                state.turn.take_if(|(running, _)| *running == id);
            }
            out.turn_ended(&key, id, outcome).await;
        });
        self.with_chat(&chat, |s| s.turn = Some((turn_id, task.abort_handle())));
    }

    async fn on_text(&self, chat: Chat, text: &str) {
        let text = text.trim();
        let (command, rest) = match text.strip_prefix('/') {
            Some(cmd) => cmd
                .split_once(' ')
                .map_or((cmd, ""), |(c, r)| (c, r.trim())),
            None => ("", text),
        };
        let out = self.out.clone();
        match command {
            "new" => self.new_conversation(chat).await,
            "stop" => {
                self.stop_turn(&chat).await;
            }
            "ask" if !rest.is_empty() => {
                let prompt = Prompt::Confirm {
                    title: "Question".into(),
                    text: rest.to_owned(),
                };
                self.ask(chat, prompt, Asked::YesNo).await;
            }
            "approve" if !rest.is_empty() => {
                let prompt = Prompt::ExecApproval {
                    command: rest.to_owned(),
                    description: "The demo agent wants to run this command.".into(),
                    allow_permanent: true,
                    allow_session: true,
                };
                let asked = Asked::Approval {
                    command: rest.to_owned(),
                };
                self.ask(chat, prompt, asked).await;
            }
            "card" if !rest.is_empty() => {
                let (title, body) = rest.split_once('|').unwrap_or((rest, ""));
                let card = Card {
                    title: title.trim().to_owned(),
                    body: body.trim().to_owned(),
                    ttl_s: None,
                };
                self.start_turn(chat.clone(), async move {
                    out.display(&chat, card).await?;
                    reply(&*out, &chat, "Card shown.").await
                })
                .await;
            }
            "action" if !rest.is_empty() => {
                let (name, args) = rest.split_once(' ').unwrap_or((rest, "{}"));
                let (name, args) = (name.to_owned(), args.trim().to_owned());
                self.start_turn(chat.clone(), async move {
                    let text = match serde_json::from_str(&args) {
                        Err(err) => format!("Action failed: the arguments are not JSON ({err})"),
                        Ok(args) => match out.invoke_action(&chat, &name, args).await {
                            Ok(result) => format!("Result: {result}"),
                            Err(err) => format!("Action failed: {err}"),
                        },
                    };
                    reply(&*out, &chat, &text).await
                })
                .await;
            }
            "choose" if !rest.is_empty() => {
                let choices: Vec<String> = rest
                    .split(',')
                    .map(|c| c.trim().to_owned())
                    .filter(|c| !c.is_empty())
                    .collect();
                let prompt = Prompt::Clarify {
                    question: "Which one?".into(),
                    choices: choices.clone(),
                    multi_select: false,
                };
                self.ask(chat, prompt, Asked::Choice { choices }).await;
            }
            "long" => {
                let text: String = (1..=LONG_SENTENCES)
                    .map(|n| format!("This is sentence number {n} of a long reply. "))
                    .collect();
                self.start_turn(chat.clone(), async move {
                    reply(&*out, &chat, text.trim_end()).await
                })
                .await;
            }
            "media" | "image" => {
                let scratch = self.scratch.clone();
                self.start_turn(chat.clone(), async move {
                    let picture = Picture::write(&scratch).map_err(|e| {
                        DeliveryError::Failed(format!("cannot write the picture: {e}"))
                    })?;
                    let caption = Some("A demo picture".into());
                    let sent = out.send_image(&chat, picture.path.clone(), caption).await;
                    // The transports have read the file when send_image returns.
                    drop(picture);
                    sent
                })
                .await;
            }
            "slow" => {
                self.start_turn(chat.clone(), async move { slow(&*out, &chat).await })
                    .await;
            }
            "fail" => {
                self.start_turn(chat.clone(), async move {
                    out.status(&chat, "Thinking").await;
                    tokio::time::sleep(FAIL_AFTER).await;
                    Err(DeliveryError::Failed("the demo was asked to fail".into()))
                })
                .await;
            }
            // Until `/stop`, a new message or the device's own turn timeout.
            "stall" => {
                self.start_turn(chat, std::future::pending()).await;
            }
            _ => {
                let answer = format!("You said: {text}");
                self.start_turn(chat.clone(), async move {
                    out.status(&chat, "Thinking").await;
                    stream(&*out, &chat, &answer).await
                })
                .await;
            }
        }
    }

    async fn new_conversation(&self, chat: Chat) {
        self.stop_turn(&chat).await;
        self.with_chat(&chat, |s| s.asked.clear());
        let out = self.out.clone();
        self.start_turn(chat.clone(), async move {
            reply(&*out, &chat, "Started a new conversation.").await
        })
        .await;
    }

    async fn ask(&self, chat: Chat, prompt: Prompt, asked: Asked) {
        match self.out.ask(&chat, prompt, None).await {
            Ok(id) => self.with_chat(&chat, |s| {
                s.asked.insert(id, asked);
            }),
            Err(err) => {
                let out = self.out.clone();
                let text = format!("I could not ask: {err}");
                self.start_turn(
                    chat.clone(),
                    async move { reply(&*out, &chat, &text).await },
                )
                .await;
            }
        }
    }

    async fn on_answer(&self, chat: Chat, answer: PromptAnswer) {
        let Some(asked) = self.with_chat(&chat, |s| s.asked.remove(&answer.prompt_id)) else {
            return;
        };
        let text = match asked {
            Asked::YesNo if answer.choice.is_affirmative() => "You answered yes.".to_owned(),
            Asked::YesNo => "You answered no.".to_owned(),
            Asked::Approval { command } => match answer.choice {
                Choice::Deny | Choice::Cancel => format!("Denied: {command}"),
                choice => format!("Approved ({}): {command}", choice.as_wire()),
            },
            Asked::Choice { choices } => match answer.choice {
                Choice::Option(i) => match choices.get(i) {
                    Some(choice) => format!("You chose {choice}."),
                    None => "You chose nothing I offered.".to_owned(),
                },
                Choice::Other(text) => format!("You wrote: {text}"),
                _ => "You did not choose.".to_owned(),
            },
        };
        let out = self.out.clone();
        self.start_turn(
            chat.clone(),
            async move { reply(&*out, &chat, &text).await },
        )
        .await;
    }
}

#[async_trait]
impl Agent for DemoAgent {
    async fn handle(&self, inbound: Inbound) {
        let chat = inbound.source.chat;
        match inbound.body {
            InboundBody::Text { text, .. } => self.on_text(chat, &text).await,
            InboundBody::Voice {
                path, duration_ms, ..
            } => {
                let text = format!(
                    "I heard {:.1} seconds of audio.",
                    f64::from(duration_ms) / 1000.0
                );
                let out = self.out.clone();
                self.start_turn(chat.clone(), async move {
                    reply(&*out, &chat, &text).await?;
                    // Play the recording back, so the round trip can be heard; a device
                    // without a speaker simply does not hear it.
                    if let Err(err) = out.send_voice(&chat, path).await {
                        debug!(%err, "no playback");
                    }
                    Ok(())
                })
                .await;
            }
            InboundBody::Media { kind, caption, .. } => {
                let text = format!(
                    "Got your {}{}.",
                    serde_json::to_value(kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    caption.map(|c| format!(": {c}")).unwrap_or_default()
                );
                let out = self.out.clone();
                self.start_turn(
                    chat.clone(),
                    async move { reply(&*out, &chat, &text).await },
                )
                .await;
            }
            InboundBody::Command(Command::Stop) => {
                self.stop_turn(&chat).await;
            }
            InboundBody::Command(Command::New) => self.new_conversation(chat).await,
            InboundBody::PromptAnswer(answer) => self.on_answer(chat, answer).await,
            // The demo speaks whole files only.
            InboundBody::SpeechStopped { .. } => {}
            InboundBody::TurnTimedOut { turn_id } => self.give_up_turn(&chat, &turn_id),
        }
    }
}

/// The demo picture on disk for one send, in a directory of its own that only this
/// user may enter. Both go when it is dropped, also when the turn is cancelled mid-send,
/// so nothing is left behind. `mkdir` and `create_new` fail on anything already there, a
/// planted symlink included, so no link is followed; the random name cannot be taken in
/// advance.
struct Picture {
    dir: PathBuf,
    path: PathBuf,
}

impl Picture {
    /// Tries before giving up on names that are taken (by chance or on purpose).
    const ATTEMPTS: usize = 16;

    fn write(scratch: &Path) -> io::Result<Picture> {
        for _ in 0..Self::ATTEMPTS {
            let dir = scratch.join(format!("herald-demo-{:016x}", random_u64()));
            match Picture::write_in(dir) {
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
                result => return result,
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "every name tried for the picture's directory was taken",
        ))
    }

    /// Make `dir` (it must not exist) and the picture in it.
    fn write_in(dir: PathBuf) -> io::Result<Picture> {
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir)?;
        let path = dir.join("demo.png");
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let created = options.open(&path);
        let mut file = match created {
            Ok(file) => file,
            Err(err) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(err);
            }
        };
        // Both are ours now: dropping the value removes them, on error too.
        let picture = Picture { dir, path };
        file.write_all(DEMO_PICTURE)?;
        Ok(picture)
    }
}

impl Drop for Picture {
    fn drop(&mut self) {
        if let Err(err) = std::fs::remove_file(&self.path) {
            debug!(%err, path = %self.path.display(), "demo picture not removed");
        }
        // Only an empty directory goes: nothing else is ours to delete.
        if let Err(err) = std::fs::remove_dir(&self.dir) {
            debug!(%err, dir = %self.dir.display(), "demo picture's directory not removed");
        }
    }
}

/// 64 unpredictable bits without a dependency: std seeds each `RandomState` from the
/// operating system's randomness.
fn random_u64() -> u64 {
    use std::hash::BuildHasher;
    std::hash::RandomState::new().hash_one(std::time::SystemTime::now())
}

async fn reply(out: &dyn Outbound, chat: &Chat, text: &str) -> Result<(), DeliveryError> {
    out.send_text(chat, text, SendOptions::default())
        .await
        .map(drop)
}

/// Stream `answer` word by word as cumulative previews, then finalize it.
async fn stream(out: &dyn Outbound, chat: &Chat, answer: &str) -> Result<(), DeliveryError> {
    let words: Vec<&str> = answer.split(' ').collect();
    let options = SendOptions {
        streaming: true,
        ..SendOptions::default()
    };
    let id = out.send_text(chat, words[0], options).await?;
    for end in 2..words.len() {
        tokio::time::sleep(STREAM_STEP).await;
        out.edit_text(chat, &id, &words[..end].join(" "), false)
            .await?;
    }
    tokio::time::sleep(STREAM_STEP).await;
    out.status(chat, "").await;
    out.edit_text(chat, &id, answer, true).await
}

async fn slow(out: &dyn Outbound, chat: &Chat) -> Result<(), DeliveryError> {
    out.status(chat, "Working slowly").await;
    let options = SendOptions {
        streaming: true,
        ..SendOptions::default()
    };
    let steps = SLOW_TOTAL.as_millis() / SLOW_STEP.as_millis();
    let mut text = String::from("Counting:");
    let id = out.send_text(chat, &text, options).await?;
    for n in 1..=steps {
        tokio::time::sleep(SLOW_STEP).await;
        text.push_str(&format!(" {n}"));
        out.edit_text(chat, &id, &text, false).await?;
    }
    out.edit_text(chat, &id, "Done counting.", true).await
}

#[cfg(test)]
mod tests;
