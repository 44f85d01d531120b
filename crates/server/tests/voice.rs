//! Voice in, paced speech out and pictures, over a real socket.

use std::time::{Duration, Instant};

use futures_util::SinkExt;
use herald_gadget_proto::{
    decode_frame, encode_frame, AudioCaps, Channel, DisplayCaps, FrameHeader, ImageBox,
    ServerMessage,
};
use herald_port::InboundBody;
use herald_test_support::{
    capture, demo, test_config, Conn, Gadget, Harness, Incoming, READER_STALL, WAIT,
};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

fn speaking_gadget(rate: u32) -> Gadget {
    let mut gadget = Gadget::new();
    gadget.hello.caps.speaker = Some(AudioCaps {
        rate,
        format: "pcm16".into(),
    });
    gadget
}

/// A 440 Hz tone as PCM16 at `rate`.
fn tone(rate: u32, seconds: f32) -> Vec<u8> {
    let samples = (rate as f32 * seconds) as usize;
    (0..samples)
        .flat_map(|n| {
            let t = n as f32 / rate as f32;
            let v = (t * 440.0 * std::f32::consts::TAU).sin() * 8000.0;
            (v as i16).to_le_bytes()
        })
        .collect()
}

/// Speak `pcm` as the device does: audio.start, 40 ms channel-1 frames, audio.end.
async fn utter(conn: &mut Conn, stream: u8, rate: u32, pcm: &[u8]) {
    conn.send_raw(
        &json!({"type": "audio.start", "id": "a1", "stream": stream, "rate": rate,
                "format": "pcm16", "mode": "hold"})
        .to_string(),
    )
    .await;
    let frame_bytes = rate as usize / 25 * 2;
    for (seq, chunk) in (0u16..).zip(pcm.chunks(frame_bytes)) {
        let header = FrameHeader {
            channel: Channel::Audio,
            stream,
            seq,
        };
        conn.ws
            .send(Message::Binary(encode_frame(header, chunk).into()))
            .await
            .unwrap();
    }
    conn.send_raw(&json!({"type": "audio.end", "id": "a1", "stream": stream}).to_string())
        .await;
}

#[tokio::test]
async fn an_utterance_reaches_the_agent_as_the_wav_it_was() {
    let (factory, _port, mut inbox) = capture();
    let mut config = test_config();
    config.gadget.allow_all_users = true;
    config.gadget.max_utterance_s = 2;
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), factory).await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;

    let pcm = tone(16_000, 1.2);
    utter(&mut conn, 4, 16_000, &pcm).await;
    let inbound = tokio::time::timeout(WAIT, inbox.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(inbound.message_id, "a1");
    let InboundBody::Voice {
        path, duration_ms, ..
    } = inbound.body
    else {
        panic!("{:?}", inbound.body)
    };
    assert_eq!(duration_ms, 1200);
    let wav = std::fs::read(&path).unwrap();
    let info = herald_media::wav::inspect(&wav).unwrap();
    assert_eq!((info.rate, info.channels, info.bits), (16_000, 1, 16));
    assert_eq!(
        &wav[44..],
        &pcm[..],
        "the samples are exactly what was sent"
    );

    // Past max_utterance_s the audio is dropped.
    utter(&mut conn, 5, 16_000, &tone(16_000, 3.0)).await;
    let inbound = tokio::time::timeout(WAIT, inbox.recv())
        .await
        .unwrap()
        .unwrap();
    let InboundBody::Voice { duration_ms, .. } = inbound.body else {
        panic!()
    };
    assert_eq!(duration_ms, 2000);
}

#[tokio::test]
async fn short_or_unsupported_audio_gets_a_notice() {
    let (factory, _port, mut inbox) = capture();
    let mut config = test_config();
    config.gadget.allow_all_users = true;
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), factory).await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;

    utter(&mut conn, 1, 16_000, &tone(16_000, 0.2)).await;
    assert!(matches!(conn.recv().await, ServerMessage::Notice(n) if n.text.contains("Too short")));
    for (rate, format) in [(16_000, "opus"), (3_999, "pcm16"), (48_001, "pcm16")] {
        conn.send_raw(
            &json!({"type": "audio.start", "stream": 2, "rate": rate, "format": format})
                .to_string(),
        )
        .await;
        assert!(matches!(conn.recv().await, ServerMessage::Notice(_)));
    }
    // Frames of a stream that was never announced, and a cancelled utterance, go nowhere.
    let header = FrameHeader {
        channel: Channel::Audio,
        stream: 9,
        seq: 0,
    };
    conn.ws
        .send(Message::Binary(encode_frame(header, &[0; 640]).into()))
        .await
        .unwrap();
    conn.send_raw(
        &json!({"type": "audio.start", "stream": 3, "rate": 16000, "format": "pcm16"}).to_string(),
    )
    .await;
    conn.send_raw(&json!({"type": "audio.cancel", "stream": 3, "reason": "too short"}).to_string())
        .await;
    conn.send_raw(&json!({"type": "audio.end", "stream": 3}).to_string())
        .await;
    conn.nothing_before_pong().await;
    // The agent's next message is the one typed next: no utterance came before it.
    conn.text("a probe").await;
    let next = tokio::time::timeout(WAIT, inbox.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(&next.body, InboundBody::Text { text, .. } if text == "a probe"),
        "{next:?}"
    );
}

/// Collect one speech stream: its audio.start, the frames' payloads with their arrival
/// times, and how it ended.
async fn speech(conn: &mut Conn) -> (u32, Vec<(Instant, Vec<u8>)>, ServerMessage) {
    let (stream, rate) = loop {
        if let Incoming::Msg(ServerMessage::AudioStart(start)) = conn.next().await {
            assert_eq!(start.format, "pcm16");
            break (start.stream, start.rate);
        }
    };
    let mut frames = Vec::new();
    loop {
        match conn.next().await {
            Incoming::Frame(data) => {
                let (header, payload) = decode_frame(&data).unwrap();
                assert_eq!(header.channel, Channel::Audio);
                assert_eq!(header.stream, stream);
                assert_eq!(usize::from(header.seq), frames.len(), "consecutive");
                frames.push((Instant::now(), payload.to_vec()));
            }
            Incoming::Msg(end @ (ServerMessage::AudioEnd(_) | ServerMessage::AudioAbort(_))) => {
                return (rate, frames, end)
            }
            Incoming::Msg(_) => {}
        }
    }
}

#[tokio::test]
async fn the_demo_plays_the_recording_back_resampled_and_paced() {
    let h = Harness::start().await;
    let (mut conn, _) = speaking_gadget(22_050).connect(&h.url).await;
    utter(&mut conn, 1, 16_000, &tone(16_000, 1.0)).await;
    assert_eq!(conn.reply().await, "I heard 1.0 seconds of audio.");
    let (rate, frames, end) = speech(&mut conn).await;
    assert_eq!(rate, 22_050);
    assert!(matches!(end, ServerMessage::AudioEnd(_)));
    // The turn ends once the device has heard it.
    assert!(matches!(conn.recv().await, ServerMessage::TurnEnd(_)));
    // 40 ms frames at the speaker's rate: 882 samples.
    for (_, payload) in &frames[..frames.len() - 1] {
        assert_eq!(payload.len(), 882 * 2);
    }
    let samples: usize = frames.iter().map(|(_, p)| p.len() / 2).sum();
    assert!(
        (22_050 - 882..=22_050 + 882).contains(&samples),
        "{samples}"
    );
    // Never more than half a second ahead of real time: frame n arrives no earlier
    // than its playing time minus the lead (and a little scheduling slack).
    let start = frames[0].0;
    for (n, (at, _)) in frames.iter().enumerate() {
        let plays = Duration::from_millis(40 * n as u64);
        let earliest = plays.saturating_sub(Duration::from_millis(500) + READER_STALL);
        assert!(
            at.duration_since(start) >= earliest,
            "frame {n} came too early"
        );
    }
    let first_instant = frames
        .iter()
        .filter(|(at, _)| at.duration_since(start) < Duration::from_millis(15))
        .count();
    assert!(first_instant <= 13, "a burst of {first_instant}");
}

#[tokio::test]
async fn speech_stops_for_barge_in_cancel_and_session_new() {
    let h = Harness::start().await;
    let (mut conn, _) = speaking_gadget(16_000).connect(&h.url).await;
    // A long recording, so playback is still running when we interrupt it.
    utter(&mut conn, 1, 16_000, &tone(16_000, 4.0)).await;
    for interrupt in [
        json!({"type": "cancel"}),
        json!({"type": "session.new"}),
        json!({"type": "audio.start", "stream": 7, "rate": 16000, "format": "pcm16"}),
    ] {
        let stream = loop {
            if let Incoming::Msg(ServerMessage::AudioStart(start)) = conn.next().await {
                break start.stream;
            }
        };
        conn.send_raw(&interrupt.to_string()).await;
        let aborted = loop {
            match conn.next().await {
                Incoming::Msg(ServerMessage::AudioAbort(abort)) => break abort.stream,
                Incoming::Msg(ServerMessage::AudioEnd(_)) => panic!("played to the end"),
                _ => {}
            }
        };
        assert_eq!(aborted, stream);
        // Say it again, to get the next stream going.
        if interrupt["type"] == "audio.start" {
            conn.send_raw(&json!({"type": "audio.cancel", "stream": 7}).to_string())
                .await;
            break;
        }
        utter(&mut conn, 2, 16_000, &tone(16_000, 4.0)).await;
    }
}

/// A connection that replaces one mid-speech starts clean: the stream ends with the
/// old connection, and nothing of it, its abort included, reaches the new one.
#[tokio::test(start_paused = true)]
async fn speech_to_a_replaced_connection_ends_with_it() {
    let h = Harness::start().await;
    let gadget = speaking_gadget(16_000);
    let (mut first, _) = gadget.connect(&h.url).await;
    utter(&mut first, 1, 16_000, &tone(16_000, 4.0)).await;
    while !matches!(
        first.next().await,
        Incoming::Msg(ServerMessage::AudioStart(_))
    ) {}
    let (mut second, _) = gadget.connect(&h.url).await;
    // Longer than the whole reply would take to play: nothing of it came meanwhile.
    second.quiet_for(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn a_device_without_a_speaker_never_gets_audio() {
    let h = Harness::start().await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    utter(&mut conn, 1, 16_000, &tone(16_000, 0.5)).await;
    assert_eq!(conn.reply().await, "I heard 0.5 seconds of audio.");
    let deadline = tokio::time::Instant::now() + Duration::from_millis(800);
    while let Ok(next) = tokio::time::timeout_at(deadline, conn.next()).await {
        match next {
            Incoming::Frame(_) | Incoming::Msg(ServerMessage::AudioStart(_)) => {
                panic!("audio sent to a device without a speaker")
            }
            Incoming::Msg(_) => {}
        }
    }
}

#[tokio::test]
async fn pictures_are_fitted_and_sent_in_chunks() {
    let h = Harness::start().await;
    let mut gadget = Gadget::new();
    gadget.hello.caps.display = Some(DisplayCaps {
        width: Some(320),
        height: Some(240),
        image: Some(ImageBox {
            width: 320,
            height: 196,
            format: "rgb565".into(),
        }),
        ..Default::default()
    });
    let (mut conn, _) = gadget.connect(&h.url).await;
    conn.text("/image").await;
    let start = loop {
        if let Incoming::Msg(ServerMessage::ImageStart(start)) = conn.next().await {
            break start;
        }
    };
    // 1200×900 fitted into 320×196 keeps 4:3.
    assert_eq!((start.width, start.height), (261, 196));
    assert_eq!(start.format, "rgb565");
    assert_eq!(start.ttl_s, Some(30));
    let mut bytes = 0;
    loop {
        match conn.next().await {
            Incoming::Frame(data) => {
                let (header, payload) = decode_frame(&data).unwrap();
                assert_eq!(header.channel, Channel::Image);
                assert_eq!(header.stream, start.stream);
                assert!(payload.len() <= 4096);
                bytes += payload.len();
            }
            Incoming::Msg(ServerMessage::ImageEnd(end)) => {
                assert_eq!(end.stream, start.stream);
                break;
            }
            Incoming::Msg(_) => {}
        }
    }
    assert_eq!(bytes, 261 * 196 * 2);
    // The caption follows as a reply, which stays on screen under the picture (a
    // notice would be hidden behind it).
    let caption = conn
        .until(|m| match m {
            ServerMessage::Reply(r) => Some(r),
            ServerMessage::Notice(n) => panic!("the caption came as a notice: {n:?}"),
            _ => None,
        })
        .await;
    assert_eq!(caption.text, "A demo picture");
    assert!(!caption.interim);

    // Without an image box: a notice instead.
    let (mut plain, _) = Gadget::new().connect(&h.url).await;
    plain.text("/image").await;
    let notice = plain
        .until(|m| match m {
            ServerMessage::Notice(n) => Some(n.text),
            ServerMessage::ImageStart(_) => panic!("an image for a device without a box"),
            _ => None,
        })
        .await;
    assert!(notice.contains("cannot show pictures"), "{notice}");
}

#[tokio::test]
async fn an_unpaired_gadget_writes_nothing_to_disk() {
    let h = Harness::start_in(test_config(), tempfile::tempdir().unwrap(), demo()).await;
    let (mut conn, welcome) = Gadget::new().connect(&h.url).await;
    assert!(!welcome.paired);
    utter(&mut conn, 4, 16_000, &tone(16_000, 1.0)).await;
    conn.send_raw(r#"{"type":"state","sensors":{"temp_c":21.5}}"#)
        .await;
    let notice = conn
        .until(|m| match m {
            ServerMessage::Notice(n) => Some(n.text),
            _ => None,
        })
        .await;
    assert!(notice.contains("Pair this device first"), "{notice}");
    // The session handles frames in order: once this answer arrives, the readings sent
    // before it were handled too.
    conn.send_raw(r#"{"type":"ping","ts":1}"#).await;
    conn.until(|m| matches!(m, ServerMessage::Pong(_)).then_some(()))
        .await;
    let inbox = h.dir.path().join("inbox");
    let files = std::fs::read_dir(&inbox).map(|d| d.count()).unwrap_or(0);
    assert_eq!(files, 0, "no recording of an unpaired device");
    let (_, devices) = h.admin("GET", "/v1/devices", None).await;
    assert!(
        devices[0]["sensors"]
            .as_object()
            .is_none_or(|s| s.is_empty()),
        "{devices}"
    );
}

/// The next audio stream's start, skipping what else comes; then every frame of it up to
/// its end: (stream, bytes of PCM).
async fn next_stream(conn: &mut Conn) -> (u8, usize) {
    let stream = loop {
        if let Incoming::Msg(ServerMessage::AudioStart(start)) = conn.next().await {
            assert_eq!(start.turn, None, "a cue is not the turn's speech");
            break start.stream;
        }
    };
    let mut bytes = 0;
    loop {
        match conn.next().await {
            Incoming::Frame(frame) => {
                let (header, payload) = decode_frame(&frame).unwrap();
                assert_eq!(header.stream, stream);
                bytes += payload.len();
            }
            Incoming::Msg(ServerMessage::AudioEnd(end)) if end.stream == stream => {
                return (stream, bytes)
            }
            Incoming::Msg(other) => panic!("within a cue: {other:?}"),
        }
    }
}

/// Never silent: a voice turn is acknowledged at once, while the agent has not answered.
#[tokio::test]
async fn a_voice_turn_is_acknowledged_with_a_cue_at_once() {
    let (factory, _port, mut inbox) = capture();
    let mut config = test_config();
    config.gadget.allow_all_users = true;
    config.gadget.cue_after_s = 4;
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), factory).await;
    let (mut conn, _) = speaking_gadget(16_000).connect(&h.url).await;
    utter(&mut conn, 1, 16_000, &tone(16_000, 1.0)).await;
    // The cue: a short clip at the speaker's rate (two notes, 160 ms).
    let (_, bytes) = next_stream(&mut conn).await;
    assert!((3_000..8_000).contains(&bytes), "{bytes} bytes of cue");
    let voice = tokio::time::timeout(WAIT, inbox.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(voice.body, InboundBody::Voice { .. }), "{voice:?}");
}

/// A turn that fails is heard (a cue), seen (a notice) and ended as failed; one the agent
/// leaves hanging gets soft cues while it waits, until it is stopped.
#[tokio::test]
async fn failed_and_stalled_turns_are_never_silent() {
    let h = Harness::start_with(|c| {
        c.gadget.allow_all_users = true;
        // After the demo's `/fail` (1 s), so no "still working" cue meets the failure.
        c.gadget.cue_after_s = 2;
        c.gadget.cue_every_s = 1;
    })
    .await;
    let (mut conn, _) = speaking_gadget(24_000).connect(&h.url).await;

    conn.text("/fail").await;
    // The notice, the failure cue played to its end, and turn.end (after the cue, when
    // the cue began before the turn ended).
    let (mut notice, mut cue, mut end) = (None, None, None);
    let mut playing = None;
    while notice.is_none() || cue.is_none() || end.is_none() {
        match conn.next().await {
            Incoming::Msg(ServerMessage::Notice(n)) => notice = Some(n.text),
            Incoming::Msg(ServerMessage::TurnEnd(e)) => end = Some(e.outcome),
            Incoming::Msg(ServerMessage::AudioStart(start)) => playing = Some((start.stream, 0)),
            Incoming::Frame(frame) => {
                let (header, payload) = decode_frame(&frame).unwrap();
                if let Some((stream, bytes)) = &mut playing {
                    assert_eq!(header.stream, *stream);
                    *bytes += payload.len();
                }
            }
            Incoming::Msg(ServerMessage::AudioEnd(_)) => cue = playing.take().map(|(_, b)| b),
            _ => {}
        }
    }
    assert_eq!(notice.as_deref(), Some("Sorry, that did not work."));
    assert_eq!(end.map(|o| o.as_str()), Some("failure"));
    let bytes = cue.unwrap();
    assert!(bytes > 10_000, "the failure cue at 24 kHz: {bytes} bytes");

    conn.text("/stall").await;
    // "Still working", two seconds into the quiet and every second after.
    for _ in 0..2 {
        let (_, bytes) = next_stream(&mut conn).await;
        assert!(
            (3_000..10_000).contains(&bytes),
            "a soft short cue: {bytes} bytes"
        );
    }
    conn.send_raw(r#"{"type":"cancel"}"#).await;
    let end = conn
        .until(|m| match m {
            ServerMessage::TurnEnd(end) => Some(end),
            _ => None,
        })
        .await;
    assert_eq!(end.outcome.as_str(), "cancelled");
}
