//! `herald serve --backend bridge` as the Hermes plugin runs it: a child process whose
//! stdin and stdout carry the bridge's JSON lines. The test plays Hermes on the pipes,
//! and real gadgets and phones connect over WebSockets; `herald send` runs as its own
//! process against the same data directory.

use std::collections::VecDeque;
use std::process::Stdio;
use std::time::Duration;

use herald_gadget_proto::{
    ActionSpec, Answer, AudioCaps, DeviceMessage, PromptReply, ServerMessage,
};
use herald_mobile_proto::ServerFrame;
use herald_test_support::{Conn, Gadget, Incoming, Phone, APP_TOKEN, WAIT};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const BIN: &str = env!("CARGO_BIN_EXE_herald");

/// Hermes's end of the pipes of a `herald serve --backend bridge` child.
struct Hermes {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Lines read while waiting for something else.
    backlog: VecDeque<Value>,
    next_id: u64,
    ready: Value,
    dir: tempfile::TempDir,
}

impl Hermes {
    async fn start() -> Hermes {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(BIN)
            .args(["serve", "--backend", "bridge", "--host", "127.0.0.1"])
            .args([
                "--gadget-port",
                "0",
                "--mobile-port",
                "0",
                "--admin-port",
                "0",
            ])
            .arg("--data-dir")
            .arg(dir.path())
            .env("RUST_LOG", "error")
            .env("MOBILE_TOKEN", APP_TOKEN)
            .env_remove("HERALD_CONFIG")
            .env_remove("GADGET_ALLOW_ALL_USERS")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut hermes = Hermes {
            child,
            stdin,
            stdout,
            backlog: VecDeque::new(),
            next_id: 1,
            ready: Value::Null,
            dir,
        };
        // Start-up may take a while on a busy machine; after that every line is prompt.
        let ready = tokio::time::timeout(Duration::from_secs(30), hermes.stdout.next_line())
            .await
            .expect("ready in time")
            .unwrap()
            .expect("a first line");
        hermes.ready = serde_json::from_str(&ready).unwrap();
        hermes
    }

    fn url(&self, which: &str) -> String {
        self.ready["args"][which].as_str().unwrap().to_owned()
    }

    async fn write(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// The next line herald writes.
    async fn line(&mut self) -> Value {
        if let Some(line) = self.backlog.pop_front() {
            return line;
        }
        let line = tokio::time::timeout(WAIT, self.stdout.next_line())
            .await
            .expect("a line in time")
            .unwrap()
            .expect("herald's stdout is open");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Send a request and wait for its response; other lines wait in the backlog.
    async fn request(&mut self, op: &str, args: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"type": "request", "id": id, "op": op, "args": args});
        self.write(&line.to_string()).await;
        self.response(id).await
    }

    async fn response(&mut self, id: u64) -> Value {
        let waiting = |line: &Value| line["type"] == "response" && line["id"] == id;
        if let Some(at) = self.backlog.iter().position(waiting) {
            return self.backlog.remove(at).unwrap();
        }
        let mut seen = VecDeque::new();
        loop {
            let line = tokio::time::timeout(WAIT, self.stdout.next_line())
                .await
                .expect("a response in time")
                .unwrap()
                .expect("herald's stdout is open");
            let line: Value = serde_json::from_str(&line).unwrap();
            if waiting(&line) {
                self.backlog.extend(seen);
                return line;
            }
            seen.push_back(line);
        }
    }

    /// Tell herald something; nothing answers.
    async fn notify(&mut self, op: &str, args: Value) {
        let line = json!({"type": "event", "op": op, "args": args});
        self.write(&line.to_string()).await;
    }

    /// A request that must succeed; returns its result.
    async fn call(&mut self, op: &str, args: Value) -> Value {
        let response = self.request(op, args).await;
        assert_eq!(response["ok"], true, "{op} failed: {response}");
        response["result"].clone()
    }

    /// A request that must fail; returns the error's kind.
    async fn refused(&mut self, op: &str, args: Value) -> String {
        let response = self.request(op, args).await;
        assert_eq!(response["ok"], false, "{op} succeeded: {response}");
        response["error"]["kind"].as_str().unwrap().to_owned()
    }

    /// The next line, which must be herald asking `op`; returns its id and args.
    async fn asked(&mut self, op: &str) -> (u64, Value) {
        let line = self.line().await;
        assert_eq!(line["type"], "request", "{line}");
        assert_eq!(line["op"], op, "{line}");
        (line["id"].as_u64().unwrap(), line["args"].clone())
    }

    async fn answer(&mut self, id: u64, result: Value) {
        let line = json!({"type": "response", "id": id, "ok": true, "result": result});
        self.write(&line.to_string()).await;
    }

    /// Answer the next `is_authorized` question.
    async fn authorize(&mut self, authorized: bool) -> Value {
        let (id, args) = self.asked("is_authorized").await;
        self.answer(id, json!({ "authorized": authorized })).await;
        args
    }

    /// Answer the next `pairing_code` question with `code` and `command`; returns its args.
    async fn give_code(&mut self, code: &str, command: &str) -> Value {
        let (id, args) = self.asked("pairing_code").await;
        let answer = json!({"code": code, "command": command, "ttl_s": 3600});
        self.answer(id, answer).await;
        args
    }

    /// The next line, which must be an `inbound` event; returns its args.
    async fn inbound(&mut self) -> Value {
        let line = self.line().await;
        assert_eq!(
            (&line["type"], &line["op"]),
            (&json!("event"), &json!("inbound")),
            "{line}"
        );
        line["args"].clone()
    }

    /// Connect `gadget`, answering the authorization question with `authorized`.
    async fn connect(&mut self, gadget: &Gadget, authorized: bool) -> Conn {
        let (gadget, url) = (gadget.clone(), self.url("gadget_url"));
        let connecting = tokio::spawn(async move { gadget.connect(&url).await });
        self.authorize(authorized).await;
        let (conn, welcome) = connecting.await.unwrap();
        assert_eq!(welcome.paired, authorized);
        conn
    }

    /// `herald ARGS --data-dir <this server's>` with `stdin`; returns status and stdout.
    async fn herald(&self, args: &[&str], stdin: &str) -> (i32, String) {
        herald_in(self.dir.path(), args, stdin).await
    }

    /// [`Hermes::herald`] left running, for a command that waits on Hermes's answers.
    fn in_background(&self, args: &[&str]) -> tokio::task::JoinHandle<(i32, String)> {
        let dir = self.dir.path().to_owned();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        tokio::spawn(async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            herald_in(&dir, &args, "").await
        })
    }
}

async fn herald_in(dir: &std::path::Path, args: &[&str], stdin: &str) -> (i32, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .env_remove("HERALD_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    let output = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("herald finished in time")
        .unwrap();
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.code().unwrap_or(-1), text)
}

fn gadget_with_led() -> Gadget {
    let mut gadget = Gadget::new();
    gadget.hello.actions = vec![ActionSpec {
        name: "led.set".into(),
        description: Some("Set the LED colour".into()),
        params: Some(json!({"type": "object", "properties": {"color": {"type": "string"}}})),
    }];
    gadget
}

fn gadget_chat(gadget: &Gadget) -> Value {
    json!({"platform": "gadget", "id": gadget.id})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_comes_first_and_closing_stdin_stops_herald() {
    let mut hermes = Hermes::start().await;
    let ready = &hermes.ready;
    assert_eq!(
        (&ready["type"], &ready["op"]),
        (&json!("event"), &json!("ready"))
    );
    assert_eq!(ready["args"]["protocol"], 1);
    for url in ["gadget_url", "mobile_url", "admin_url"] {
        assert!(hermes.url(url).contains("127.0.0.1:"), "{ready}");
    }
    let gadget = Gadget::new();
    let mut conn = hermes.connect(&gadget, true).await;
    assert!(hermes.dir.path().join("admin.json").exists());

    drop(hermes.stdin.take());
    let status = tokio::time::timeout(Duration::from_secs(10), hermes.child.wait())
        .await
        .expect("herald stopped in time")
        .unwrap();
    assert!(status.success(), "{status}");
    // The connection ends with the process; a close frame may or may not make it out.
    if let Some(close) = conn.closed(WAIT).await {
        assert_eq!(u16::from(close.code), 1001, "{close:?}");
    }
    assert!(!hermes.dir.path().join("admin.json").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hermes_decides_pairing_and_its_code_is_shown_until_used() {
    let mut hermes = Hermes::start().await;
    let gadget = Gadget::new();
    let mut conn = hermes.connect(&gadget, false).await;
    let command = "hermes pairing approve gadget ABCD2345";
    let args = hermes.give_code("ABCD2345", command).await;
    assert_eq!(
        args,
        json!({"platform": "gadget", "user_id": gadget.id, "user_name": "Test Gadget"})
    );
    let ServerMessage::Pairing(pairing) = conn.recv().await else {
        panic!("no pairing code")
    };
    assert_eq!(
        (pairing.code.as_str(), pairing.command.as_str()),
        ("ABCD2345", command)
    );

    // A reconnect shows the same code without asking Hermes (which would refuse a
    // second code within ten minutes): the frame comes with no question answered.
    drop(conn);
    let mut conn = hermes.connect(&gadget, false).await;
    let ServerMessage::Pairing(again) = conn.recv().await else {
        panic!("no pairing code on reconnect")
    };
    assert_eq!(again.code, "ABCD2345");

    // Until it is paired, the agent cannot reach it: no text, cards or actions.
    let chat = gadget_chat(&gadget);
    for (op, args) in [
        ("send_text", json!({"chat": chat, "text": "psst"})),
        (
            "display",
            json!({"chat": chat, "card": {"title": "T", "body": "B"}}),
        ),
        (
            "invoke_action",
            json!({"chat": chat, "name": "led.set", "args": {}}),
        ),
    ] {
        assert_eq!(hermes.refused(op, args).await, "unsupported", "{op}");
    }
    let listed = hermes.call("devices", json!({"platform": "gadget"})).await;
    assert_eq!(listed["devices"][0]["paired"], false);

    // `hermes pairing approve` ran: the plugin tells herald, the device hears at once.
    let authorize = json!({"platform": "gadget", "user_id": gadget.id, "authorized": true});
    hermes.call("set_authorized", authorize).await;
    assert!(matches!(conn.recv().await, ServerMessage::Paired(_)));
    conn.text("hello").await;
    let inbound = hermes.inbound().await;
    assert_eq!(inbound["body"], json!({"kind": "text", "text": "hello"}));

    // Back after a drop, it is known to be paired: its handshake asks Hermes nothing
    // (a question here would go unanswered and the handshake would not finish).
    drop(conn);
    let (mut conn, welcome) = gadget.connect(&hermes.url("gadget_url")).await;
    assert!(welcome.paired);

    // A revoke unpairs it, and the used code is not shown again: Hermes issues a new one.
    let revoke = json!({"platform": "gadget", "user_id": gadget.id, "authorized": false});
    hermes.call("set_authorized", revoke).await;
    assert!(matches!(conn.recv().await, ServerMessage::Unpaired(_)));
    hermes
        .give_code("WXYZ6789", "hermes pairing approve gadget WXYZ6789")
        .await;
    let ServerMessage::Pairing(fresh) = conn.recv().await else {
        panic!("no fresh pairing code")
    };
    assert_eq!(fresh.code, "WXYZ6789");

    // The owner's pairing commands (the console's too) work on Hermes's store: the
    // waiting code is the one herald showed, the approved users are Hermes's.
    let listing = hermes.in_background(&["pairing", "list", "--json"]);
    for platform in ["gadget", "mobile"] {
        let (id, args) = hermes.asked("pairings").await;
        assert_eq!(args, json!({ "platform": platform }));
        let approved = match platform {
            "gadget" => json!([{"user_id": "hg-old", "user_name": "Old", "approved_at": 1.7e9}]),
            _ => json!([]),
        };
        hermes.answer(id, json!({ "approved": approved })).await;
    }
    let (status, output) = listing.await.unwrap();
    assert_eq!(status, 0, "{output}");
    let listed: Vec<Value> = serde_json::from_str(&output).unwrap();
    assert_eq!(listed.len(), 2, "{output}");
    assert_eq!(
        (
            &listed[0]["user_id"],
            &listed[0]["code"],
            &listed[0]["approved_at"]
        ),
        (&json!(gadget.id), &json!("WXYZ6789"), &Value::Null)
    );
    assert_eq!(
        (&listed[1]["user_id"], &listed[1]["approved_at"]),
        (&json!("hg-old"), &json!(1_700_000_000_000_i64))
    );

    // Approving the code (typed in lower case) approves it in Hermes; the device hears.
    let approving = hermes.in_background(&["pairing", "approve", "gadget", "wxyz6789"]);
    let (id, args) = hermes.asked("approve_pairing").await;
    assert_eq!(args, json!({"platform": "gadget", "code": "WXYZ6789"}));
    let user = json!({"user_id": gadget.id, "user_name": "Test Gadget"});
    hermes.answer(id, json!({ "approved": user })).await;
    let (status, output) = approving.await.unwrap();
    assert_eq!(status, 0, "{output}");
    assert!(matches!(conn.recv().await, ServerMessage::Paired(_)));

    // A code Hermes does not hold is refused with the reason.
    let approving = hermes.in_background(&["pairing", "approve", "gadget", "NOPE2345"]);
    let (id, _) = hermes.asked("approve_pairing").await;
    hermes.answer(id, json!({ "approved": null })).await;
    let (status, output) = approving.await.unwrap();
    assert_ne!(status, 0);
    assert!(output.contains("no pending pairing"), "{output}");

    // Revoking asks Hermes to revoke, then whether an allowlist still lets it in.
    let revoking = hermes.in_background(&["pairing", "revoke", "gadget", &gadget.id]);
    let (id, args) = hermes.asked("revoke_pairing").await;
    assert_eq!(args, json!({"platform": "gadget", "user_id": gadget.id}));
    hermes.answer(id, json!({ "revoked": true })).await;
    hermes.authorize(false).await;
    let (status, output) = revoking.await.unwrap();
    assert_eq!(status, 0, "{output}");
    assert!(matches!(conn.recv().await, ServerMessage::Unpaired(_)));

    // Approving without a code is Herald's own pairing, not in force behind Hermes.
    let (status, output) = hermes
        .herald(&["pairing", "approve", "gadget", "--user", &gadget.id], "")
        .await;
    assert_ne!(status, 0);
    assert!(output.contains("hermes gadget pair"), "{output}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gadget_turn_travels_over_the_lines() {
    let mut hermes = Hermes::start().await;
    let gadget = gadget_with_led();
    let mut conn = hermes.connect(&gadget, true).await;
    let chat = gadget_chat(&gadget);

    conn.text("turn the light on").await;
    let inbound = hermes.inbound().await;
    assert_eq!(inbound["source"]["chat"], chat);
    assert_eq!(inbound["source"]["user_id"], gadget.id.as_str());
    assert_eq!(inbound["source"]["user_name"], "Test Gadget");
    assert_eq!(inbound["body"]["text"], "turn the light on");
    // The device comes described, so the plugin need not ask for its profile.
    let profile = &inbound["profile"];
    assert_eq!(profile["paired"], true);
    assert_eq!(profile["screen"]["width"], 320);
    assert_eq!(profile["actions"][0]["name"], "led.set");
    assert_eq!(
        profile,
        &hermes.call("profile", json!({ "chat": chat })).await["profile"]
    );

    // News is one line each way and no answer: the turn is named by Hermes.
    let turn_id = "hermes-turn-1";
    let started = json!({ "chat": chat, "turn_id": turn_id });
    hermes.notify("turn_started", started).await;
    assert!(matches!(conn.recv().await, ServerMessage::TurnStart(t) if t.turn == turn_id));
    hermes
        .notify("status", json!({"chat": chat, "text": "Switching"}))
        .await;
    assert!(matches!(conn.recv().await, ServerMessage::Status(s) if s.text == "Switching"));
    hermes
        .call(
            "transcript",
            json!({"chat": chat, "text": "turn the light on"}),
        )
        .await;
    assert!(
        matches!(conn.recv().await, ServerMessage::Transcript(t) if t.text == "turn the light on")
    );

    let sent = hermes
        .call(
            "send_text",
            json!({"chat": chat, "text": "It", "streaming": true}),
        )
        .await;
    let message_id = sent["message_id"].as_str().unwrap().to_owned();
    assert!(matches!(conn.recv().await, ServerMessage::ReplyDelta(d) if d.text == "It"));
    let edit =
        json!({"chat": chat, "message_id": message_id, "text": "It is on.", "finalize": true});
    hermes.call("edit_text", edit).await;
    assert!(matches!(conn.recv().await, ServerMessage::Reply(r) if r.text == "It is on."));

    // An exec approval is a yes/no prompt; "yes" comes back as Hermes's "once".
    let prompt = json!({"kind": "exec_approval", "command": "rm -rf /tmp/x",
                        "description": "recursive delete", "allow_permanent": false});
    let asked = hermes
        .call("ask", json!({"chat": chat, "prompt": prompt}))
        .await;
    let prompt_id = asked["prompt_id"].as_str().unwrap().to_owned();
    let ServerMessage::Prompt(shown) = conn.recv().await else {
        panic!("no prompt")
    };
    assert_eq!(shown.title, "Allow this command?");
    assert!(shown.text.contains("rm -rf /tmp/x"), "{}", shown.text);
    conn.send(&DeviceMessage::PromptReply(PromptReply {
        id: shown.id,
        answer: Answer::Yes,
    }))
    .await;
    let answer = hermes.inbound().await;
    assert_eq!(
        answer["body"],
        json!({"kind": "prompt_answer", "prompt_id": prompt_id, "choice": "once"})
    );
    // A clarify's choices are asked one by one; the second's yes answers "option 1".
    let clarify = json!({"kind": "clarify", "question": "Which?", "choices": ["a", "b"]});
    let asked = hermes
        .call("ask", json!({"chat": chat, "prompt": clarify}))
        .await;
    for answer in [Answer::No, Answer::Yes] {
        let ServerMessage::Prompt(step) = conn.recv().await else {
            panic!("no clarify step")
        };
        conn.send(&DeviceMessage::PromptReply(PromptReply {
            id: step.id,
            answer,
        }))
        .await;
    }
    let answer = hermes.inbound().await;
    assert_eq!(
        answer["body"],
        json!({"kind": "prompt_answer", "prompt_id": asked["prompt_id"], "choice": "option", "index": 1})
    );
    // A question without choices cannot be shown; the plugin asks it in words.
    let open = json!({"kind": "clarify", "question": "Which?"});
    let kind = hermes
        .refused("ask", json!({"chat": chat, "prompt": open}))
        .await;
    assert_eq!(kind, "unsupported");

    // A device action called as a tool: the gadget answers, the result comes back.
    let action = json!({"chat": chat, "name": "led.set", "args": {"color": "red"}});
    let id = hermes.next_id;
    hermes.next_id += 1;
    let line = json!({"type": "request", "id": id, "op": "invoke_action", "args": action});
    hermes.write(&line.to_string()).await;
    let ServerMessage::Action(call) = conn.recv().await else {
        panic!("no action")
    };
    assert_eq!(
        (call.name.as_str(), &call.args),
        ("led.set", &json!({"color": "red"}))
    );
    let result =
        json!({"type": "action.result", "id": call.id, "ok": true, "result": {"led": "red"}});
    conn.send_raw(&result.to_string()).await;
    let response = hermes.response(id).await;
    assert_eq!(
        response["result"],
        json!({"result": {"led": "red"}}),
        "{response}"
    );
    let unknown = json!({"chat": chat, "name": "self.destruct", "args": {}});
    assert_eq!(
        hermes.refused("invoke_action", unknown).await,
        "unknown_action"
    );

    let listed = hermes.call("devices", json!({"platform": "gadget"})).await;
    let device = &listed["devices"][0];
    assert_eq!(device["id"], gadget.id.as_str());
    assert_eq!(device["online"], true);
    assert_eq!(device["paired"], true);
    assert_eq!(device["screen"]["width"], 320);
    assert_eq!(device["screen"]["height"], 240);
    assert_eq!(device["charset"], "utf8");
    assert_eq!(device["speaker_rate"], Value::Null);
    assert_eq!(device["actions"][0]["name"], "led.set");
    assert_eq!(device["actions"][0]["description"], "Set the LED colour");
    let profile = hermes.call("profile", json!({"chat": chat})).await;
    assert_eq!(profile["profile"]["actions"], device["actions"]);
    assert_eq!(profile["profile"]["screen"], device["screen"]);

    let ended = json!({"chat": chat, "turn_id": turn_id, "outcome": "success"});
    hermes.notify("turn_ended", ended).await;
    assert!(matches!(conn.recv().await, ServerMessage::TurnEnd(t) if t.turn == turn_id));

    let elsewhere =
        json!({"chat": {"platform": "gadget", "id": "hg-0000000000000000"}, "text": "hi"});
    assert_eq!(hermes.refused("send_text", elsewhere).await, "offline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phones_cards_and_voice_reach_hermes() {
    let mut hermes = Hermes::start().await;
    let url = hermes.url("mobile_url");
    let (mut phone, _) = Phone::connect(&url, APP_TOKEN, "tel-1").await;
    let chat = json!({"platform": "mobile", "id": "tel-1"});

    phone.text("m1", "hello").await;
    let asked = hermes.authorize(true).await;
    assert_eq!(asked["platform"], "mobile");
    let inbound = hermes.inbound().await;
    assert_eq!(inbound["source"]["chat"], chat);
    assert_eq!(inbound["source"]["user_id"], asked["user_id"]);
    assert_eq!(inbound["body"]["text"], "hello");
    // The answer is remembered: the next message goes straight to Hermes.
    phone.text("m2", "again").await;
    assert_eq!(hermes.inbound().await["body"]["text"], "again");

    // Without permanent approval the card offers no "always", and refuses it.
    let prompt = json!({"kind": "exec_approval", "command": "rm -rf /tmp/x",
                        "description": "recursive delete", "allow_permanent": false});
    let prompt_id = hermes
        .call("ask", json!({"chat": chat, "prompt": prompt}))
        .await["prompt_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let card = phone
        .until(|f| match f {
            ServerFrame::Prompt(card) => Some(card),
            _ => None,
        })
        .await;
    assert_eq!(card.id, prompt_id);
    let options: Vec<&str> = card.options.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(options, ["once", "session", "deny"]);
    assert_eq!(card.command.as_deref(), Some("rm -rf /tmp/x"));
    phone
        .send(json!({"t": "prompt", "prompt_id": prompt_id, "option_id": "always"}))
        .await;
    let answer = hermes.inbound().await;
    assert_eq!(answer["body"]["choice"], "deny");

    let clarify =
        json!({"kind": "clarify", "question": "Which colour?", "choices": ["red", "green"]});
    let prompt_id = hermes
        .call(
            "ask",
            json!({"chat": chat, "prompt": clarify, "ttl_s": 120}),
        )
        .await["prompt_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let card = phone
        .until(|f| match f {
            ServerFrame::Prompt(card) => Some(card),
            _ => None,
        })
        .await;
    assert_eq!(card.timeout_seconds, 120);
    phone
        .send(json!({"t": "prompt", "prompt_id": prompt_id, "option_id": "c1"}))
        .await;
    let answer = hermes.inbound().await;
    assert_eq!(
        answer["body"],
        json!({"kind": "prompt_answer", "prompt_id": prompt_id, "choice": "option", "index": 1})
    );

    // Voice arrives as a WAV file Hermes can transcribe.
    let recording = hermes.dir.path().join("recording.wav");
    herald_media::wav::write_wav(&recording, 16_000, &[0; 16_000]).unwrap();
    let wav = std::fs::read(&recording).unwrap();
    let data = herald_mobile_proto::encode_base64(&wav);
    phone
        .send(json!({"t": "audio", "id": "v1", "format": "wav", "data": data}))
        .await;
    let voice = hermes.inbound().await;
    assert_eq!(voice["body"]["kind"], "voice");
    assert_eq!(voice["body"]["duration_ms"], 500);
    let path = voice["body"]["path"].as_str().unwrap();
    assert_eq!(std::fs::read(path).unwrap(), wav);

    // `hermes pairing revoke` ran: the plugin tells herald, which asks again at the
    // phone's next message; the answer is no, and a pairing code goes instead.
    let user_id = asked["user_id"].clone();
    let revoke = json!({"platform": "mobile", "user_id": user_id, "authorized": false});
    hermes.call("set_authorized", revoke).await;
    phone.text("m3", "still there?").await;
    hermes.authorize(false).await;
    let args = hermes
        .give_code("PHONE234", "hermes pairing approve mobile PHONE234")
        .await;
    assert_eq!(args["user_id"], user_id);
    let notice = phone
        .until(|f| match f {
            ServerFrame::Message(m) => Some(m.text),
            _ => None,
        })
        .await;
    assert!(notice.contains("PHONE234"), "{notice}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_that_are_not_the_protocol_are_refused_or_dropped() {
    let mut hermes = Hermes::start().await;
    hermes.write("this is not json").await;
    hermes
        .write(r#"{"type":"request","id":500,"op":"fly","args":{}}"#)
        .await;
    let refused = hermes.response(500).await;
    assert_eq!(refused["error"]["kind"], "bad_request", "{refused}");
    hermes.write(r#"{"type":"request","id":501}"#).await;
    let refused = hermes.response(501).await;
    assert_eq!(refused["error"]["kind"], "bad_request", "{refused}");
    let huge = format!(
        r#"{{"type":"request","id":502,"op":"notice","args":{{"text":"{}"}}}}"#,
        "x".repeat(2 << 20)
    );
    hermes.write(&huge).await;
    // Still in step: the next request gets its answer, and nothing came for the others.
    let listed = hermes.call("devices", json!({})).await;
    assert_eq!(listed, json!({"devices": []}));
    assert!(hermes.backlog.is_empty(), "{:?}", hermes.backlog);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_the_limit_are_refused_not_queued() {
    let mut hermes = Hermes::start().await;
    let gadget = gadget_with_led();
    let mut conn = hermes.connect(&gadget, true).await;
    let action = json!({"chat": gadget_chat(&gadget), "name": "led.set", "args": {}});
    // 64 device actions wait for a gadget that never answers; the next is refused.
    let first = hermes.next_id;
    for id in first..=first + 64 {
        let line = json!({"type": "request", "id": id, "op": "invoke_action", "args": action});
        hermes.write(&line.to_string()).await;
    }
    hermes.next_id = first + 65;
    let refused = hermes.response(first + 64).await;
    assert_eq!(refused["error"]["kind"], "unavailable", "{refused}");
    // The gadget has all 64 and goes away: every waiting action fails at once.
    for _ in 0..64 {
        assert!(matches!(conn.recv().await, ServerMessage::Action(_)));
    }
    drop(conn);
    for id in first..first + 64 {
        let failed = hermes.response(id).await;
        assert_eq!(failed["error"]["kind"], "disconnected", "{failed}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn herald_send_delivers_through_the_running_server() {
    let mut hermes = Hermes::start().await;
    let gadget = Gadget::new();
    let mut conn = hermes.connect(&gadget, true).await;
    let url = hermes.url("mobile_url");
    let (mut phone, _) = Phone::connect(&url, APP_TOKEN, "tel-2").await;

    let (status, output) = hermes
        .herald(
            &[
                "send",
                "gadget",
                &gadget.id,
                "--text",
                "from cron",
                "--json",
            ],
            "",
        )
        .await;
    assert_eq!(status, 0, "{output}");
    let answer: Value = serde_json::from_str(output.trim()).unwrap();
    assert!(answer["message_id"].is_string(), "{answer}");
    assert_eq!(conn.reply().await, "from cron");

    let document = hermes.dir.path().join("notes.txt");
    std::fs::write(&document, "the notes").unwrap();
    let document = document.to_string_lossy().into_owned();
    let args = [
        "send",
        "mobile",
        "tel-2",
        "--text-stdin",
        "--document",
        &document,
    ];
    let (status, output) = hermes.herald(&args, "a long\nmessage").await;
    assert_eq!(status, 0, "{output}");
    assert_eq!(phone.reply().await, "a long\nmessage");
    let media = phone
        .until(|f| match f {
            ServerFrame::Media(media) => Some(media),
            _ => None,
        })
        .await;
    assert_eq!(media.filename.as_deref(), Some("notes.txt"));

    let args = [
        "send",
        "gadget",
        "hg-0000000000000000",
        "--text",
        "x",
        "--json",
    ];
    let (status, output) = hermes.herald(&args, "").await;
    assert_eq!(status, 1, "{output}");
    assert!(output.contains("not connected"), "{output}");
    let (status, output) = hermes
        .herald(&["send", "fax", "x", "--text", "y"], "")
        .await;
    assert_eq!(status, 2, "{output}");
    let (status, output) = hermes.herald(&["send", "gadget", &gadget.id], "").await;
    assert_eq!(status, 2, "{output}");

    let elsewhere = tempfile::tempdir().unwrap();
    let args = ["send", "gadget", &gadget.id, "--text", "x"];
    let (status, output) = herald_in(elsewhere.path(), &args, "").await;
    assert_eq!(status, 2, "{output}");
    assert!(output.contains("not running"), "{output}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speech_plays_to_the_end_when_hermes_deletes_the_file_at_once() {
    let mut hermes = Hermes::start().await;
    let mut gadget = Gadget::new();
    gadget.hello.caps.speaker = Some(AudioCaps {
        rate: 16_000,
        format: "pcm16".into(),
    });
    let mut conn = hermes.connect(&gadget, true).await;
    let speech = hermes.dir.path().join("tts_reply.mp3");
    // A WAV under an .mp3 name, as Hermes's command TTS writes it: the content decides.
    herald_media::wav::write_wav(&speech, 16_000, &[0; 32_000]).unwrap();
    let args = json!({"chat": gadget_chat(&gadget), "path": speech});
    hermes.call("send_voice", args).await;
    // Hermes removes its TTS file as soon as send_voice has answered.
    std::fs::remove_file(&speech).unwrap();
    let end = loop {
        if let Incoming::Msg(end @ (ServerMessage::AudioEnd(_) | ServerMessage::AudioAbort(_))) =
            conn.next().await
        {
            break end;
        }
    };
    assert!(matches!(end, ServerMessage::AudioEnd(_)), "{end:?}");
}

/// Base64 as the plugin sends a speech chunk.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for group in bytes.chunks(3) {
        let n = group.iter().fold(0u32, |n, b| n << 8 | u32::from(*b)) << (8 * (3 - group.len()));
        for i in 0..4 {
            let c = if i <= group.len() {
                ABC[(n >> (18 - 6 * i) & 63) as usize]
            } else {
                b'='
            };
            out.push(char::from(c));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_streamed_as_pcm_lines_plays_on_the_gadget_and_barge_in_is_reported() {
    let mut hermes = Hermes::start().await;
    let mut gadget = Gadget::new();
    gadget.hello.caps.speaker = Some(AudioCaps {
        rate: 16_000,
        format: "pcm16".into(),
    });
    let mut conn = hermes.connect(&gadget, true).await;
    let chat = gadget_chat(&gadget);
    // Half a second of a 440 Hz tone at 24 kHz, in writes that split samples.
    let pcm: Vec<u8> = (0..12_000)
        .flat_map(|n| {
            let v =
                (8_000.0 * (f64::from(n) * 440.0 / 24_000.0 * std::f64::consts::TAU).sin()) as i16;
            v.to_le_bytes()
        })
        .collect();
    let begin = json!({"chat": chat, "speech_id": "sp-1", "sample_rate": 24000, "channels": 1});
    assert_eq!(hermes.call("speech_begin", begin).await, json!({}));
    for chunk in pcm.chunks(4_999) {
        let args = json!({"chat": chat, "speech_id": "sp-1", "pcm": base64(chunk)});
        assert_eq!(hermes.call("speech_write", args).await, json!({}));
    }
    let stale = json!({"chat": chat, "speech_id": "sp-0", "pcm": base64(&pcm[..10])});
    assert_eq!(
        hermes.call("speech_write", stale).await,
        json!({"dropped": true})
    );
    let bad = json!({"chat": chat, "speech_id": "sp-1", "sample_rate": 100, "channels": 1});
    assert_eq!(hermes.refused("speech_begin", bad).await, "bad_request");
    let end = json!({"chat": chat, "speech_id": "sp-1"});
    assert_eq!(hermes.call("speech_end", end).await, json!({}));
    let start = conn
        .until(|m| match m {
            ServerMessage::AudioStart(start) => Some(start),
            _ => None,
        })
        .await;
    assert_eq!(start.rate, 16_000);
    let mut samples = 0;
    loop {
        match conn.next().await {
            Incoming::Frame(data) => samples += (data.len() - 4) / 2,
            Incoming::Msg(ServerMessage::AudioEnd(end)) => {
                assert_eq!(end.stream, start.stream);
                break;
            }
            Incoming::Msg(other) => assert!(
                !matches!(
                    other,
                    ServerMessage::AudioStart(_) | ServerMessage::AudioAbort(_)
                ),
                "{other:?}"
            ),
        }
    }
    assert!((8_000 - 640..=8_000 + 640).contains(&samples), "{samples}");

    // The user talks over the next reply: Hermes hears that it was interrupted.
    let begin = json!({"chat": chat, "speech_id": "sp-2", "sample_rate": 24000, "channels": 1});
    hermes.call("speech_begin", begin).await;
    let args = json!({"chat": chat, "speech_id": "sp-2", "pcm": base64(&pcm)});
    hermes.call("speech_write", args).await;
    conn.until(|m| matches!(m, ServerMessage::AudioStart(_)).then_some(()))
        .await;
    conn.send_raw(r#"{"type":"audio.start","stream":3,"rate":16000,"format":"pcm16"}"#)
        .await;
    conn.until(|m| matches!(m, ServerMessage::AudioAbort(_)).then_some(()))
        .await;
    let stopped = hermes.inbound().await;
    assert_eq!(
        stopped["body"],
        json!({"kind": "speech_stopped", "speech_id": "sp-2", "reason": "interrupted"})
    );
}
