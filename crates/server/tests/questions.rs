//! One question on every device at hand: a gadget's question shows on its person's
//! connected phones (and on one that connects while it is open), the first answer
//! wherever it is given resolves it as the gadget's own, and every other copy is
//! withdrawn with where it was answered. Real server, demo agent, real WebSockets.

use herald_config::Secret;
use herald_gadget_proto::{Answer, DeviceMessage, PromptReply, ServerMessage};
use herald_mobile_proto::ServerFrame;
use herald_test_support::{Conn, Gadget, Harness, Phone, APP_TOKEN};
use serde_json::json;

/// Gadgets and the app token's user allowed, as after pairing both.
async fn start() -> Harness {
    Harness::start_with(|c| {
        c.gadget.allow_all_users = true;
        c.mobile.allow_all_users = true;
    })
    .await
}

async fn asked(conn: &mut Conn) -> herald_gadget_proto::Prompt {
    conn.until(|m| match m {
        ServerMessage::Prompt(p) => Some(p),
        _ => None,
    })
    .await
}

#[tokio::test]
async fn a_gadget_s_question_answered_on_the_phone_is_withdrawn_from_the_gadget() {
    let h = start().await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;

    conn.text("/approve rm -rf /tmp/x").await;
    let question = asked(&mut conn).await;
    let copy = phone.card().await;
    assert_eq!(copy.id, question.id, "one question, one id");
    assert!(
        copy.text.starts_with("Test Gadget asks: ") && copy.text.contains("rm -rf /tmp/x"),
        "{}",
        copy.text
    );

    phone
        .send(json!({"t": "prompt", "prompt_id": copy.id, "option_id": "once"}))
        .await;
    assert_eq!(
        phone.prompt_done().await,
        (copy.id.clone(), Some("once".into()), false)
    );
    // The gadget's question is closed, it hears where, and the agent resolved it as the
    // gadget's own: its answer comes to the gadget.
    // (The withdrawal and the agent's reply race: either may come first.)
    let (mut closed, mut told, mut replied) = (None, None, None);
    while closed.is_none() || told.is_none() || replied.is_none() {
        match conn.recv().await {
            ServerMessage::PromptClose(c) => closed = Some(c.id),
            ServerMessage::Notice(n) => told = Some(n.text),
            ServerMessage::Reply(r) => replied = Some(r.text),
            _ => {}
        }
    }
    assert_eq!(closed.as_ref(), Some(&question.id));
    assert_eq!(told.as_deref(), Some("Answered on Test Phone."));
    assert_eq!(replied.as_deref(), Some("Approved (once): rm -rf /tmp/x"));

    // Its own answer, late, resolves nothing a second time.
    conn.send(&DeviceMessage::PromptReply(PromptReply {
        id: question.id.clone(),
        answer: Answer::No,
    }))
    .await;
    conn.text("/ask Still there?").await;
    let next = asked(&mut conn).await;
    assert_ne!(next.id, question.id);
    let copy = phone.card().await;
    assert_eq!(copy.id, next.id, "nothing came between: no second answer");
}

#[tokio::test]
async fn answered_on_the_gadget_the_phone_s_copy_goes_and_a_late_tap_counts_for_nothing() {
    let h = start().await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;

    conn.text("/ask Lights off?").await;
    let question = asked(&mut conn).await;
    let copy = phone.card().await;
    conn.send(&DeviceMessage::PromptReply(PromptReply {
        id: question.id.clone(),
        answer: Answer::Yes,
    }))
    .await;
    assert_eq!(conn.reply().await, "You answered yes.");

    assert_eq!(phone.prompt_done().await, (copy.id.clone(), None, true));
    assert_eq!(phone.reply().await, "Answered on Test Gadget.");
    // The withdrawn card answered anyway: refused as lapsed, never a second answer.
    phone
        .send(json!({"t": "prompt", "prompt_id": copy.id, "option_id": "deny"}))
        .await;
    assert_eq!(phone.prompt_done().await, (copy.id.clone(), None, true));
    conn.text("/ask Again?").await;
    let again = asked(&mut conn).await;
    assert_ne!(
        again.id, question.id,
        "no reply of a second answer came first"
    );
}

#[tokio::test]
async fn a_phone_that_connects_while_the_question_is_open_gets_it() {
    let h = start().await;
    // The person's phone has been here before (so Herald knows whose it is), and is away.
    let (phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    drop(phone);
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    conn.text("/choose Tea, Coffee").await;
    let question = asked(&mut conn).await;

    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let copy = phone.card().await;
    assert_eq!(copy.id, question.id);
    assert!(copy.text.starts_with("Test Gadget asks: "), "{}", copy.text);
    assert!(copy.timeout_seconds <= 300 && copy.timeout_seconds > 250);
    phone
        .send(json!({"t": "prompt", "prompt_id": copy.id, "option_id": "c1"}))
        .await;
    assert_eq!(conn.reply().await, "You chose Coffee.");
}

#[tokio::test]
async fn a_person_not_allowed_to_reach_the_agent_is_shown_nothing() {
    // Gadgets are allowed; the app token's user is not paired.
    let h = Harness::start().await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    conn.text("/approve cat /etc/shadow").await;
    asked(&mut conn).await;
    // Once the agent has gone on to the gadget's next message, any copy would be out.
    conn.text("hi").await;
    assert_eq!(conn.reply().await, "You said: hi");
    phone.text("m1", "hello?").await;
    let first = phone.recv().await;
    assert!(
        !matches!(first, ServerFrame::Prompt(_)),
        "no copy for an unpaired user: {first:?}"
    );
}

const CAROL: &str = "carols-token-0123456789abcdef01234567";

/// A gadget paired as Carol's: its questions go to Carol's phone, not to the other
/// user's; the owner is kept, shown, changed and checked.
#[tokio::test]
async fn a_gadget_s_owner_decides_whose_phones_see_its_questions() {
    let h = Harness::start_with(|c| {
        c.mobile.allow_all_users = true;
        c.mobile.extra_tokens = Some(Secret(format!("carol:{CAROL}")));
    })
    .await;
    let (mut carols, _) = Phone::connect(&h.mobile_url, CAROL, "tel-carol").await;
    let (mut others, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-other").await;
    let gadget = Gadget::new();
    let (mut conn, _) = gadget.connect(&h.url).await;
    let ServerMessage::Pairing(pairing) = conn.recv().await else {
        panic!("no pairing")
    };

    // Nobody called "dave"; a phone takes no owner. Neither approves anything.
    let approve = |owner: &str, platform: &str| json!({"platform": platform, "code": pairing.code, "owner": owner});
    let (status, body) = h
        .admin(
            "POST",
            "/v1/pairing/approve",
            Some(approve("dave", "gadget")),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("nobody called dave"),
        "{body}"
    );
    let (status, _) = h
        .admin(
            "POST",
            "/v1/pairing/approve",
            Some(approve("carol", "mobile")),
        )
        .await;
    assert_eq!(status, 400);
    let (status, _) = h
        .admin(
            "POST",
            "/v1/pairing/approve",
            Some(approve("carol", "gadget")),
        )
        .await;
    assert_eq!(status, 200);
    assert!(matches!(conn.recv().await, ServerMessage::Paired(_)));
    let (_, devices) = h.admin("GET", "/v1/devices", None).await;
    assert_eq!(devices[0]["owner"], "carol");

    conn.text("/ask Feed the cat?").await;
    let question = asked(&mut conn).await;
    assert_eq!(carols.card().await.id, question.id);
    conn.send(&DeviceMessage::PromptReply(PromptReply {
        id: question.id.clone(),
        answer: Answer::Yes,
    }))
    .await;
    assert_eq!(carols.prompt_done().await.0, question.id);
    others.text("m1", "/ask Mine?").await;
    let first = others.card().await;
    assert_eq!(
        first.text, "Question\nMine?",
        "the other user saw nothing of Carol's gadget"
    );

    // Changed later, and cleared: with two users there is then nobody to share with.
    let path = format!("/v1/devices/{}/owner", gadget.id);
    let (status, record) = h.admin("PUT", &path, Some(json!({"owner": null}))).await;
    assert_eq!((status, &record["owner"]), (200, &json!(null)));
    let (status, _) = h
        .admin(
            "PUT",
            "/v1/devices/hg-nobody/owner",
            Some(json!({"owner": "carol"})),
        )
        .await;
    assert_eq!(status, 404);
    conn.text("/ask Anyone?").await;
    let question = asked(&mut conn).await;
    conn.send(&DeviceMessage::PromptReply(PromptReply {
        id: question.id,
        answer: Answer::No,
    }))
    .await;
    assert_eq!(conn.reply().await, "You answered no.");
    carols.text("m1", "/ask Only mine?").await;
    assert_eq!(
        carols.card().await.text,
        "Question\nOnly mine?",
        "no copy for a gadget of nobody's"
    );
}
