//! What crosses to the page, in the shapes core.ts reads. The device's own rules are
//! tested in herald-device; here, that they arrive whole.

use herald_device::Instant;
use serde_json::{json, Value};

use super::*;

fn counting(buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = i as u8;
    }
}

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// Every action waiting, with its bulk.
fn drain(tab: &mut Tab) -> Vec<(Value, Vec<u8>)> {
    let mut bulk = Vec::new();
    std::iter::from_fn(|| tab.next_action(&mut bulk).map(|a| (a, bulk.clone()))).collect()
}

fn named<'a>(actions: &'a [(Value, Vec<u8>)], what: &str) -> Vec<&'a (Value, Vec<u8>)> {
    actions.iter().filter(|(a, _)| a["do"] == what).collect()
}

/// A booted tab, connected and sent its `hello`: the actions on the way.
fn connected(settings: Value) -> (Tab, Vec<(Value, Vec<u8>)>) {
    let mut tab = Tab::boot(&settings.to_string(), counting, at(0)).unwrap();
    let mut actions = drain(&mut tab);
    let first = tab.next_deadline().expect("a first connection is planned");
    tab.timeout(first);
    actions.extend(drain(&mut tab));
    assert_eq!(named(&actions, "connect").len(), 1, "{actions:?}");
    tab.handle(Event::Connected, first);
    actions.extend(drain(&mut tab));
    (tab, actions)
}

#[test]
fn a_first_boot_makes_a_key_for_the_page_to_keep_and_a_later_boot_is_the_same_device() {
    let (tab, actions) = connected(json!({"name": "Kitchen tab"}));
    let stored = named(&actions, "store_key");
    let key = stored[0].0["key"].as_str().unwrap();
    assert_eq!(
        decode_key(key).map(|k| k.len()),
        Ok(32),
        "32 bytes of base64"
    );
    let id = tab.device().identity().device_id().to_string();

    let settings = json!({"name": "Kitchen tab", "key": key});
    let (again, actions) = connected(settings);
    assert_eq!(again.device().identity().device_id(), id);
    assert!(
        named(&actions, "store_key").is_empty(),
        "nothing new to keep"
    );

    let bad = Tab::boot(&json!({"key": "abcd"}).to_string(), counting, at(0));
    assert!(matches!(bad, Err(BootError::BadKey(KeyError::Length(3)))));
    assert!(matches!(
        Tab::boot("{", counting, at(0)),
        Err(BootError::NotJson(_))
    ));
}

#[test]
fn the_hello_goes_as_text_and_is_logged_without_the_token() {
    let settings = json!({"name": "Tab", "token": "tab-token-1234"});
    let (tab, actions) = connected(settings);
    let sent = named(&actions, "send");
    let hello: Value = serde_json::from_str(sent[0].0["text"].as_str().unwrap()).unwrap();
    assert_eq!(hello["type"], "hello");
    assert_eq!(hello["token"], "tab-token-1234");
    assert_eq!(hello["board"], "browser-tab");
    assert_eq!(hello["caps"]["display"]["charset"], "utf8");
    assert!(
        hello["caps"].get("ota").is_none(),
        "a tab takes no firmware"
    );
    let id = tab.device().identity().device_id();
    assert_eq!(sent[0].0["log"], format!("hello {id}"));
}

#[test]
fn a_key_or_a_mac_never_reaches_the_log() {
    let auth = |key: Option<&str>, mac: Option<&str>| {
        DeviceMessage::Auth(Auth {
            key: key.map(Into::into),
            mac: mac.map(Into::into),
        })
    };
    let first = logged(&auth(Some("c2VjcmV0"), None));
    assert_eq!(first, r#"{"type":"auth","key":"<the device key>"}"#);
    let later = logged(&auth(None, Some("bWFj")));
    assert_eq!(later, r#"{"type":"auth","mac":"<mac>"}"#);
}

#[test]
fn the_view_says_what_the_page_draws_and_a_picture_comes_as_pixels() {
    let (mut tab, _) = connected(json!({}));
    let mut bulk = vec![1, 2, 3];
    let view = tab.view(&mut bulk);
    assert_eq!(view["screen"], "connecting");
    assert_eq!(view["phase"], "handshake");
    assert_eq!(view["paired"], false);
    assert_eq!(view["volume"], 80);
    assert!(view["image"].is_null());
    assert!(bulk.is_empty(), "no picture, no pixels");

    // A question says from when its answers count.
    let challenge = r#"{"type":"challenge","nonce":"bm9uY2Utbm9uY2Utbm9uY2U=","enrolled":true}"#;
    tab.handle(Event::Text(challenge), at(100));
    let welcome = r#"{"type":"welcome","session":"s-1","paired":true,"heartbeat_s":30,"server":"herald","proto":1}"#;
    tab.handle(Event::Text(welcome), at(100));
    let prompt = r#"{"type":"prompt","id":"q1","title":"Go on?","text":"Shall we?"}"#;
    tab.handle(Event::Text(prompt), at(1_000));
    let view = tab.view(&mut bulk);
    assert_eq!(view["screen"], "prompt", "{view}");
    assert_eq!(view["answers_from"], 1_600);
    assert_eq!(view["title"], "Go on?");
}

#[test]
fn buttons_by_name_typed_text_and_the_page_s_own_actions() {
    let (mut tab, _) = connected(json!({}));
    assert!(tab.button("talk", true, at(10)));
    assert!(!tab.button("volume-knob", true, at(10)));
    assert_eq!(
        tab.send_text("hello", at(20)),
        Err("not connected to the server".into())
    );

    let led =
        r#"{"name":"led.set","params":{"type":"object","properties":{"color":{"type":"string"}}}}"#;
    assert_eq!(tab.register_action(led), Ok(()));
    let reserved = r#"{"name":"speaker.volume"}"#;
    assert!(tab.register_action(reserved).is_err());
    assert!(tab.register_action("not json").is_err());
    let unknown = r#"{"id":"x1","result":{"led":"red"}}"#;
    assert_eq!(
        tab.complete_action(unknown),
        Err("no pending action has this id".into())
    );
}

#[test]
fn the_board_is_the_page_s_geometry() {
    let board = board_json();
    assert_eq!(board["width"], 320);
    assert_eq!(board["image"], json!({"width": 320, "height": 196}));
    assert_eq!(board["mic_rate"], 16_000);
    assert_eq!(board["text_cols"], 25);
}
