//! The demo picture: written only for the length of a send, in a directory of its own,
//! through no planted link, and gone afterwards, in whatever temporary directory. And a
//! stalled turn herald gave up: its work stops.

use std::process::Command as Process;

use herald_port::{
    DeviceSummary, Inbound, InboundBody, Notification, Platform, Request, RequestError, Response,
    Source,
};
use tokio::sync::mpsc;

use super::*;

/// What the port saw of one picture during the send.
#[derive(Debug)]
struct Seen {
    path: PathBuf,
    read: Result<Vec<u8>, String>,
    /// The permission bits of its directory and of the file.
    modes: Option<(u32, u32)>,
}

#[cfg(unix)]
fn modes(path: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .map(|m| m.permissions().mode() & 0o777)
    };
    Some((mode(path.parent()?)?, mode(path)?))
}

#[cfg(not(unix))]
fn modes(_path: &Path) -> Option<(u32, u32)> {
    None
}

/// A port that reads each picture while `send_image` runs, as the transports do, and
/// reports how each turn ended.
struct Recorder {
    pictures: Mutex<Vec<Seen>>,
    events: mpsc::UnboundedSender<Event>,
    /// Keep each send going until it is cancelled, as a slow device would.
    hold: bool,
}

#[derive(Debug, PartialEq)]
enum Event {
    /// A picture was read; the send goes on.
    Sending,
    /// A held send was dropped: its turn was cancelled.
    Dropped,
    Started(TurnId),
    Ended(Outcome),
}

/// Reports `Dropped` when the held send is dropped.
struct OnDrop(mpsc::UnboundedSender<Event>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(Event::Dropped);
    }
}

#[async_trait]
impl Outbound for Recorder {
    async fn request(&self, _chat: &Chat, request: Request) -> Result<Response, RequestError> {
        Ok(match request {
            Request::SendImage { path, .. } => {
                let read = std::fs::read(&path).map_err(|e| e.to_string());
                let modes = modes(&path);
                let seen = Seen { path, read, modes };
                self.pictures.lock().unwrap().push(seen);
                if self.hold {
                    let _dropped = OnDrop(self.events.clone());
                    let _ = self.events.send(Event::Sending);
                    std::future::pending::<()>().await;
                }
                Response::Done {}
            }
            Request::SendText { .. } => Response::MessageId {
                message_id: "m1".into(),
            },
            _ => Response::Done {},
        })
    }

    async fn notify(&self, _chat: &Chat, notification: Notification) {
        let event = match notification {
            Notification::TurnStarted { turn_id } => Event::Started(turn_id),
            Notification::TurnEnded { outcome, .. } => Event::Ended(outcome),
            _ => return,
        };
        let _ = self.events.send(event);
    }

    async fn devices(&self) -> Result<Vec<DeviceSummary>, DeliveryError> {
        Ok(Vec::new())
    }

    async fn set_authorized(&self, _platform: Platform, _user_id: &str, _authorized: bool) {}
}

fn text(text: &str) -> Inbound {
    Inbound {
        source: Source {
            chat: Chat::mobile("tel-1"),
            user_id: "user-1".into(),
            user_name: None,
        },
        message_id: text.into(),
        body: InboundBody::Text {
            text: text.into(),
            reply_to: None,
        },
        profile: None,
    }
}

async fn next(events: &mut mpsc::UnboundedReceiver<Event>) -> Event {
    tokio::time::timeout(Duration::from_secs(10), events.recv())
        .await
        .expect("an event within 10 s")
        .expect("the recorder is alive")
}

/// The port and what it reports, and the agent `build` makes on it.
fn recorded(
    hold: bool,
    build: impl FnOnce(Arc<dyn Outbound>) -> DemoAgent,
) -> (Arc<Recorder>, mpsc::UnboundedReceiver<Event>, DemoAgent) {
    let (events, reports) = mpsc::unbounded_channel();
    let recorder = Arc::new(Recorder {
        pictures: Mutex::default(),
        events,
        hold,
    });
    let agent = build(recorder.clone());
    (recorder, reports, agent)
}

/// Send `/image` to the agent `build` makes and wait for the turn's end; returns how it
/// ended and the pictures the port saw.
async fn picture_turn(build: impl FnOnce(Arc<dyn Outbound>) -> DemoAgent) -> (Outcome, Vec<Seen>) {
    let (recorder, mut events, agent) = recorded(false, build);
    agent.handle(text("/image")).await;
    assert!(matches!(next(&mut events).await, Event::Started(_)));
    let Event::Ended(outcome) = next(&mut events).await else {
        panic!("the turn should have ended")
    };
    let pictures = std::mem::take(&mut *recorder.pictures.lock().unwrap());
    (outcome, pictures)
}

/// A new empty directory under the temporary directory, for one test.
fn fresh_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("herald-agents-test-{:016x}", random_u64()));
    std::fs::create_dir(&dir).unwrap();
    dir
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

/// The one picture the port saw: it came from under `dir` and was the demo picture.
fn assert_sent_from(pictures: &[Seen], dir: &Path) {
    let [seen] = pictures else {
        panic!("one picture expected, the port saw {pictures:?}")
    };
    let path = &seen.path;
    assert!(
        path.starts_with(dir),
        "{} is not under {}",
        path.display(),
        dir.display()
    );
    let bytes = seen
        .read
        .as_ref()
        .expect("the picture was readable during the send");
    assert!(
        bytes.as_slice() == DEMO_PICTURE,
        "the port read something else"
    );
}

#[tokio::test]
async fn the_picture_lives_only_as_long_as_its_send() {
    let scratch = fresh_dir();
    let (outcome, pictures) =
        picture_turn(|out| DemoAgent::with_scratch_dir(out, scratch.clone())).await;
    let left = entries(&scratch);
    std::fs::remove_dir_all(&scratch).unwrap();
    assert_eq!(outcome, Outcome::Success);
    assert_sent_from(&pictures, &scratch);
    // Only this user may look into the directory or read the file.
    if cfg!(unix) {
        assert_eq!(pictures[0].modes, Some((0o700, 0o600)));
    }
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn a_send_cancelled_midway_leaves_nothing_either() {
    let scratch = fresh_dir();
    let (recorder, mut events, agent) = recorded(true, |out| {
        DemoAgent::with_scratch_dir(out, scratch.clone())
    });
    agent.handle(text("/image")).await;
    assert!(matches!(next(&mut events).await, Event::Started(_)));
    assert_eq!(next(&mut events).await, Event::Sending);
    let during = entries(&scratch);
    agent.handle(text("/stop")).await;
    let mut after_stop = vec![next(&mut events).await, next(&mut events).await];
    after_stop.sort_by_key(|e| format!("{e:?}"));
    // The cancelled send was dropped, and with it (in the same drop) the picture.
    let left = entries(&scratch);
    std::fs::remove_dir_all(&scratch).unwrap();
    assert_eq!(
        after_stop,
        [Event::Dropped, Event::Ended(Outcome::Cancelled)]
    );
    assert_eq!(during.len(), 1, "the picture's directory during the send");
    assert_sent_from(&recorder.pictures.lock().unwrap(), &scratch);
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn a_stalled_turn_herald_gave_up_stops_and_no_other() {
    let (_recorder, mut events, agent) = recorded(false, DemoAgent::new);
    let given_up = |turn_id| Inbound {
        body: InboundBody::TurnTimedOut { turn_id },
        ..text("timed out")
    };
    agent.handle(text("/stall")).await;
    let Event::Started(stalled) = next(&mut events).await else {
        panic!("the turn should have started")
    };
    // Another turn's timeout leaves this one running: `/stop` still ends it.
    agent.handle(given_up(TurnId::next())).await;
    agent.handle(text("/stop")).await;
    assert_eq!(next(&mut events).await, Event::Ended(Outcome::Cancelled));

    agent.handle(text("/stall")).await;
    let Event::Started(stalled_again) = next(&mut events).await else {
        panic!("the turn should have started")
    };
    assert_ne!(stalled, stalled_again);
    agent.handle(given_up(stalled_again)).await;
    // Herald ended that turn itself: nothing is left for `/stop` to end.
    agent.handle(text("/stop")).await;
    agent.handle(text("/stall")).await;
    assert!(matches!(next(&mut events).await, Event::Started(_)));
}

#[cfg(unix)]
#[test]
fn a_link_where_the_pictures_directory_goes_is_not_followed() {
    let base = fresh_dir();
    // A link to a directory the attacker would like written into, and a dangling one.
    let victim = base.join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::os::unix::fs::symlink(&victim, base.join("herald-demo-a")).unwrap();
    std::os::unix::fs::symlink(base.join("nowhere"), base.join("herald-demo-b")).unwrap();
    let to_victim = Picture::write_in(base.join("herald-demo-a")).map(drop);
    let dangling = Picture::write_in(base.join("herald-demo-b")).map(drop);
    let (in_victim, nowhere) = (entries(&victim), base.join("nowhere").exists());
    std::fs::remove_dir_all(&base).unwrap();
    assert_eq!(
        to_victim.map_err(|e| e.kind()),
        Err(io::ErrorKind::AlreadyExists)
    );
    assert_eq!(
        dangling.map_err(|e| e.kind()),
        Err(io::ErrorKind::AlreadyExists)
    );
    assert!(
        in_victim.is_empty(),
        "written through the link: {in_victim:?}"
    );
    assert!(!nowhere, "created through the dangling link");
}

/// Tells the child test below which temporary directory it runs in, and what to plant.
const CHILD_TMPDIR: &str = "HERALD_DEMO_TEST_TMPDIR";
const CHILD_PLANT: &str = "HERALD_DEMO_TEST_PLANT";

/// Runs `child_sends_the_picture` in a process of its own whose `TMPDIR` is a fresh
/// directory, since the process's own environment is shared by every test thread.
#[cfg(unix)]
#[test]
fn the_demo_leaves_nothing_in_the_temporary_directory_and_follows_no_planted_file() {
    for plant in ["link", "file"] {
        let tmp = fresh_dir();
        let child = Process::new(std::env::current_exe().unwrap())
            .args([
                "demo::tests::child_sends_the_picture",
                "--exact",
                "--ignored",
            ])
            .args(["--test-threads=1", "--nocapture"])
            .env("TMPDIR", &tmp)
            .env(CHILD_TMPDIR, &tmp)
            .env(CHILD_PLANT, plant)
            .output()
            .unwrap();
        let left = entries(&tmp);
        std::fs::remove_dir_all(&tmp).unwrap();
        let stdout = String::from_utf8_lossy(&child.stdout);
        let stderr = String::from_utf8_lossy(&child.stderr);
        assert!(child.status.success(), "{plant}: {stdout}\n{stderr}");
        // A filter that matched nothing would pass too: the child must have run.
        assert!(stdout.contains("1 passed"), "{plant}: {stdout}");
        assert!(
            left.is_empty(),
            "{plant}: left in the temporary directory: {left:?}"
        );
    }
}

/// The demo agent as `herald serve` builds it, with something planted where an earlier
/// version wrote its picture (`<tmp>/herald-demo-<pid>.png`): it must be neither sent
/// nor written through. It removes what it planted, so the parent sees only what the
/// agent left.
#[cfg(unix)]
#[tokio::test]
#[ignore = "run in a child process with its own TMPDIR by the test above"]
async fn child_sends_the_picture() {
    // Outside its parent it does nothing: it must not plant in a shared directory.
    let (Some(tmp), Some(plant)) = (
        std::env::var_os(CHILD_TMPDIR).map(PathBuf::from),
        std::env::var_os(CHILD_PLANT),
    ) else {
        return;
    };
    assert_eq!(std::env::temp_dir(), tmp);
    let old = tmp.join(format!("herald-demo-{}.png", std::process::id()));
    let target = tmp.join("target");
    let link = plant == "link";
    if link {
        std::os::unix::fs::symlink(&target, &old).unwrap();
    } else {
        std::fs::write(&old, b"planted").unwrap();
    }
    let (outcome, pictures) = picture_turn(DemoAgent::new).await;
    let written_through = target.exists();
    let planted = std::fs::read(&old).ok();
    let _ = std::fs::remove_file(&old);
    let _ = std::fs::remove_file(&target);
    assert_eq!(outcome, Outcome::Success);
    assert_sent_from(&pictures, &tmp);
    if link {
        assert!(!written_through, "written through the planted link");
    } else {
        assert_eq!(
            planted.as_deref(),
            Some(&b"planted"[..]),
            "the planted file changed"
        );
    }
}
