//! Cards, notices and images: default ttls, ttl 0, dismissal, stacking; and speaker audio
//! through the jitter buffer.

mod common;

use common::Rig;
use herald_device::{Action, Button, DeviceConfig, Mode, Screen, LEAD_MS};

fn card(rig: &mut Rig, title: &str, ttl: &str) {
    rig.server_json(&format!(
        r#"{{"type":"display","title":"{title}","body":"Pasta: 9 min"{ttl}}}"#
    ));
}

fn image(rig: &mut Rig, stream: u8, w: u32, h: u32, ttl: &str, pixels: &[u8]) {
    rig.server_json(&format!(
        r#"{{"type":"image.start","stream":{stream},"width":{w},"height":{h},"format":"rgb565"{ttl}}}"#
    ));
    for (seq, chunk) in pixels.chunks(3).enumerate() {
        let mut frame = vec![2, stream, seq as u8, 0];
        frame.extend_from_slice(chunk);
        rig.binary(&frame);
    }
    rig.server_json(&format!(r#"{{"type":"image.end","stream":{stream}}}"#));
}

#[test]
fn a_card_stays_15_s_by_default() {
    let mut rig = Rig::online();
    card(&mut rig, "Timer", "");
    assert_eq!(rig.screen(), Screen::Card);
    let view = rig.dev.view();
    assert_eq!(view.title, Some("Timer"));
    assert_eq!(view.lines, ["Pasta: 9 min"]);
    assert!(rig.take().contains(&Action::Redraw));
    rig.advance(14_999);
    assert_eq!(rig.screen(), Screen::Card);
    rig.advance(1);
    assert_eq!(rig.screen(), Screen::Ready);
    assert!(rig.take().contains(&Action::Redraw));
}

#[test]
fn the_next_turn_takes_the_screen_from_a_card() {
    let mut rig = Rig::online();
    rig.server_json(r#"{"type":"turn.start","turn":"u1"}"#);
    card(&mut rig, "Timer", r#","ttl_s":0"#);
    // The card's own turn answers under it.
    rig.server_json(r#"{"type":"reply","turn":"u1","text":"Card shown."}"#);
    rig.server_json(r#"{"type":"turn.end","turn":"u1","outcome":"success"}"#);
    assert_eq!(rig.screen(), Screen::Card);
    // The next turn's replies are not hidden behind it.
    rig.server_json(r#"{"type":"turn.start","turn":"u2"}"#);
    rig.server_json(r#"{"type":"reply","turn":"u2","text":"Here it is"}"#);
    assert_ne!(rig.screen(), Screen::Card);
    assert_eq!(rig.lines(), ["Here it is"]);
    // A picture's caption arrives as a reply after it and waits under it.
    image(&mut rig, 9, 2, 2, "", &[0u8; 8]);
    rig.server_json(r#"{"type":"reply","text":"A demo picture"}"#);
    assert_eq!(rig.screen(), Screen::Image);
    rig.down(Button::Cancel);
    rig.up(Button::Cancel);
    assert_eq!(
        rig.lines(),
        ["A demo picture"],
        "under the picture once it goes"
    );
}

#[test]
fn a_card_with_ttl_0_stays_until_dismissed() {
    let mut rig = Rig::online();
    card(&mut rig, "Timer", r#","ttl_s":0"#);
    rig.advance(800_000);
    assert_eq!(rig.screen(), Screen::Card);
    rig.take();
    rig.down(Button::Cancel);
    rig.up(Button::Cancel);
    assert_eq!(rig.screen(), Screen::Ready);
    assert!(rig.sent().is_empty());
}

#[test]
fn a_card_ttl_is_honoured() {
    let mut rig = Rig::online();
    card(&mut rig, "Timer", r#","ttl_s":3"#);
    rig.advance(2_999);
    assert_eq!(rig.screen(), Screen::Card);
    rig.advance(1);
    assert_eq!(rig.screen(), Screen::Ready);
}

#[test]
fn a_notice_stays_8_s_by_default_and_0_keeps_it() {
    let mut rig = Rig::online();
    rig.server_json(r#"{"type":"notice","text":"Saved"}"#);
    assert_eq!(rig.notice().as_deref(), Some("Saved"));
    rig.advance(7_999);
    assert!(rig.notice().is_some());
    rig.advance(1);
    assert_eq!(rig.notice(), None);
    rig.server_json(r#"{"type":"notice","text":"Sticky","ttl_s":0}"#);
    rig.advance(800_000);
    assert_eq!(rig.notice().as_deref(), Some("Sticky"));
    rig.server_json(r#"{"type":"notice","text":"Brief","ttl_s":2}"#);
    rig.advance(2_000);
    assert_eq!(rig.notice(), None);
}

#[test]
fn an_image_arrives_in_chunks_and_stays_30_s() {
    let mut rig = Rig::online();
    // 2×2: red, green, blue, white, chunked across pixel boundaries.
    let pixels = [0x00, 0xf8, 0xe0, 0x07, 0x1f, 0x00, 0xff, 0xff];
    image(&mut rig, 9, 2, 2, "", &pixels);
    assert_eq!(rig.screen(), Screen::Image);
    let view = rig.dev.view();
    let img = view.image.unwrap();
    assert_eq!((img.width(), img.height()), (2, 2));
    assert_eq!(img.pixel(0, 0), Some(0xF800));
    assert_eq!(img.pixel(1, 0), Some(0x07E0));
    assert_eq!(img.pixel(0, 1), Some(0x001F));
    assert_eq!(img.pixel(1, 1), Some(0xFFFF));
    rig.advance(29_999);
    assert_eq!(rig.screen(), Screen::Image);
    rig.advance(1);
    assert_eq!(rig.screen(), Screen::Ready);
}

#[test]
fn an_image_with_ttl_0_stays_and_extra_bytes_are_dropped() {
    let mut rig = Rig::online();
    image(
        &mut rig,
        3,
        1,
        1,
        r#","ttl_s":0"#,
        &[0x1f, 0x00, 0xaa, 0xbb],
    );
    rig.advance(800_000);
    let view = rig.dev.view();
    let img = view.image.unwrap();
    assert_eq!(img.rgb565_le(), [0x1f, 0x00]);
}

#[test]
fn images_that_do_not_fit_are_refused() {
    let mut rig = Rig::online();
    image(&mut rig, 1, 321, 10, "", &[0; 4]);
    image(&mut rig, 2, 10, 197, "", &[0; 4]);
    image(&mut rig, 3, 0, 10, "", &[]);
    rig.server_json(r#"{"type":"image.start","stream":4,"width":2,"height":2,"format":"jpeg"}"#);
    rig.server_json(r#"{"type":"image.end","stream":4}"#);
    assert_eq!(rig.screen(), Screen::Ready);
    assert_eq!(rig.dev.stats().refused_images, 4);

    let config = DeviceConfig {
        display: DeviceConfig::reference("x")
            .display
            .map(|d| herald_device::DisplayProfile { image: None, ..d }),
        ..DeviceConfig::reference("x")
    };
    let mut rig = Rig::with_config(config);
    rig.connect_and_welcome(true, 20);
    image(&mut rig, 1, 2, 2, "", &[0; 8]);
    assert_eq!(rig.screen(), Screen::Ready);
}

#[test]
fn the_newer_overlay_is_on_top_and_cancel_peels_them() {
    let mut rig = Rig::online();
    card(&mut rig, "First", r#","ttl_s":0"#);
    image(&mut rig, 1, 1, 1, r#","ttl_s":0"#, &[0, 0]);
    assert_eq!(rig.screen(), Screen::Image);
    rig.down(Button::Cancel);
    rig.up(Button::Cancel);
    assert_eq!(rig.screen(), Screen::Card);
    image(&mut rig, 2, 1, 1, r#","ttl_s":0"#, &[0, 0]);
    card(&mut rig, "Second", r#","ttl_s":0"#);
    assert_eq!(rig.screen(), Screen::Card);
    assert_eq!(rig.dev.view().title, Some("Second"));
    rig.down(Button::Cancel);
    rig.up(Button::Cancel);
    assert_eq!(rig.screen(), Screen::Image);
}

#[test]
fn a_long_card_body_pages() {
    let mut rig = Rig::online();
    let body = "line ".repeat(60);
    rig.server_json(&format!(
        r#"{{"type":"display","title":"Long","body":"{body}"}}"#
    ));
    assert_eq!(rig.dev.view().pages, 2);
    rig.down(Button::Down);
    assert_eq!(rig.dev.view().page, 1);
}

fn pcm_frame(stream: u8, seq: u16, samples: usize) -> Vec<u8> {
    let [lo, hi] = seq.to_le_bytes();
    let mut frame = vec![1, stream, lo, hi];
    frame.resize(4 + samples * 2, 0);
    frame
}

fn played(actions: &[Action]) -> usize {
    actions
        .iter()
        .map(|a| match a {
            Action::Play { rate, samples } => {
                assert_eq!(*rate, 16_000);
                samples.len()
            }
            _ => 0,
        })
        .sum()
}

#[test]
fn speaker_audio_is_buffered_paced_and_finished() {
    let mut rig = Rig::online();
    rig.server_json(
        r#"{"type":"audio.start","stream":7,"rate":16000,"format":"pcm16","turn":"T"}"#,
    );
    assert_eq!(rig.dev.mode(), Mode::Responding);
    assert_eq!(rig.screen(), Screen::Responding);
    // 100 ms buffered: not yet.
    rig.binary(&pcm_frame(7, 0, 1_600));
    assert_eq!(played(&rig.take()), 0);
    // 200 ms: playing starts with the lead.
    rig.binary(&pcm_frame(7, 1, 1_600));
    assert_eq!(played(&rig.take()) as u64, 16 * LEAD_MS);
    rig.advance(40);
    assert_eq!(played(&rig.take()), 640);
    rig.server_json(r#"{"type":"audio.end","stream":7}"#);
    rig.advance(1_000);
    assert_eq!(played(&rig.take()) as u64, 3_200 - 16 * LEAD_MS - 640);
    assert_eq!(rig.dev.mode(), Mode::Idle);
    assert_eq!(rig.dev.stats().playback.gaps, 0);
}

#[test]
fn audio_abort_and_a_new_stream_stop_the_speaker() {
    let mut rig = Rig::online();
    rig.server_json(r#"{"type":"audio.start","stream":7,"rate":16000,"format":"pcm16"}"#);
    rig.take();
    rig.server_json(r#"{"type":"audio.start","stream":8,"rate":16000,"format":"pcm16"}"#);
    assert!(rig.take().contains(&Action::StopPlayback));
    rig.server_json(r#"{"type":"audio.abort","stream":7}"#);
    assert!(!rig.take().contains(&Action::StopPlayback));
    rig.server_json(r#"{"type":"audio.abort","stream":8}"#);
    assert!(rig.take().contains(&Action::StopPlayback));
    assert_eq!(rig.dev.mode(), Mode::Idle);
}

#[test]
fn a_device_without_speaker_ignores_audio() {
    let config = DeviceConfig {
        speaker_rate: None,
        ..DeviceConfig::reference("x")
    };
    let mut rig = Rig::with_config(config);
    rig.connect_and_welcome(true, 20);
    rig.server_json(r#"{"type":"audio.start","stream":7,"rate":16000,"format":"pcm16"}"#);
    rig.binary(&pcm_frame(7, 0, 16_000));
    rig.server_json(r#"{"type":"audio.end","stream":7}"#);
    rig.advance(2_000);
    assert_eq!(played(&rig.take()), 0);
    assert_eq!(rig.dev.mode(), Mode::Idle);
}

#[test]
fn losing_the_connection_stops_everything_of_the_session() {
    let mut rig = Rig::online();
    rig.server_json(r#"{"type":"audio.start","stream":7,"rate":16000,"format":"pcm16"}"#);
    rig.server_json(r#"{"type":"prompt","id":"q1","title":"T","text":"?"}"#);
    rig.take();
    rig.drop_connection();
    assert!(rig.take().contains(&Action::StopPlayback));
    assert_eq!(rig.screen(), Screen::Offline);
    rig.advance(1_000);
    rig.handshake(true, 20);
    assert_eq!(rig.screen(), Screen::Ready);
    assert_eq!(rig.dev.mode(), Mode::Idle);
}

#[test]
fn every_screen_has_its_name() {
    let names: Vec<&str> = herald_device::Screen::ALL
        .iter()
        .map(|s| s.name())
        .collect();
    assert_eq!(
        names,
        [
            "boot",
            "offline",
            "connecting",
            "setup",
            "pairing",
            "ready",
            "listening",
            "thinking",
            "responding",
            "card",
            "image",
            "prompt",
            "updating"
        ]
    );
}
