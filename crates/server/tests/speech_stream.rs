//! Speech spoken as it is made (`speech_*`), over a real socket: one stream per reply,
//! resampled without clicks at chunk edges, paced, bounded, and stopped by the user.

use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_gadget_proto::{decode_frame, AudioCaps, Channel, ServerMessage};
use herald_port::{Chat, DeliveryError, InboundBody, Outbound, Request, RequestError, Response};
use herald_test_support::{
    capture, test_config, Conn, Gadget, Harness, Incoming, Phone, APP_TOKEN, READER_STALL, WAIT,
};
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

const AMPLITUDE: f64 = 12_000.0;

/// A paired gadget with a speaker at `rate`, and the agent's port to it.
async fn setup(
    rate: Option<u32>,
) -> (
    Harness,
    Arc<dyn Outbound>,
    UnboundedReceiver<herald_port::Inbound>,
    Conn,
    Chat,
) {
    let (factory, port, inbox) = capture();
    let mut config = test_config();
    config.gadget.allow_all_users = true;
    config.mobile.allow_all_users = true;
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), factory).await;
    let port = port.await.unwrap();
    let mut gadget = Gadget::new();
    gadget.hello.caps.speaker = rate.map(|rate| AudioCaps {
        rate,
        format: "pcm16".into(),
    });
    let chat = Chat::gadget(gadget.id.clone());
    let (conn, _) = gadget.connect(&h.url).await;
    (h, port, inbox, conn, chat)
}

/// A request as the bridge decodes it from Hermes's line.
fn op(op: &str, args: Value) -> Request {
    serde_json::from_value(json!({"op": op, "args": args})).unwrap()
}

fn write(id: &str, pcm: &[u8]) -> Request {
    let pcm = base64_simd::STANDARD.encode_to_string(pcm);
    op("speech_write", json!({"speech_id": id, "pcm": pcm}))
}

/// PCM16 LE of a 440 Hz sine, starting and ending at a zero crossing.
fn sine(rate: u32, seconds: f64) -> Vec<u8> {
    let len = (f64::from(rate) * seconds) as usize;
    let w = 2.0 * std::f64::consts::PI * 440.0 / f64::from(rate);
    (0..len)
        .flat_map(|n| ((AMPLITUDE * (w * n as f64).sin()).round() as i16).to_le_bytes())
        .collect()
}

/// One speech stream as the device gets it: its rate, each frame's samples with its
/// arrival time, and how it ended. Fails on a second `audio.start`.
async fn hear(conn: &mut Conn) -> (u32, Vec<(Instant, Vec<i16>)>, ServerMessage) {
    let start = conn
        .until(|m| match m {
            ServerMessage::AudioStart(start) => Some(start),
            _ => None,
        })
        .await;
    assert_eq!(start.format, "pcm16");
    let mut frames = Vec::new();
    loop {
        match conn.next().await {
            Incoming::Frame(data) => {
                let (header, payload) = decode_frame(&data).unwrap();
                assert_eq!(
                    (header.channel, header.stream),
                    (Channel::Audio, start.stream)
                );
                assert_eq!(usize::from(header.seq), frames.len(), "consecutive");
                let samples = payload
                    .chunks_exact(2)
                    .map(|b| i16::from_le_bytes([b[0], b[1]]))
                    .collect();
                frames.push((Instant::now(), samples));
            }
            Incoming::Msg(ServerMessage::AudioStart(again)) => {
                panic!("a second audio.start in one reply: {again:?}")
            }
            Incoming::Msg(end @ (ServerMessage::AudioEnd(_) | ServerMessage::AudioAbort(_))) => {
                return (start.rate, frames, end)
            }
            Incoming::Msg(_) => {}
        }
    }
}

fn total(frames: &[(Instant, Vec<i16>)]) -> usize {
    frames.iter().map(|(_, s)| s.len()).sum()
}

#[tokio::test]
async fn a_reply_written_in_odd_chunks_plays_as_one_clean_paced_stream() {
    let (_h, port, _inbox, mut conn, chat) = setup(Some(16_000)).await;
    let begin = json!({"speech_id": "r1", "sample_rate": 24000, "channels": 1});
    assert_eq!(
        port.request(&chat, op("speech_begin", begin))
            .await
            .unwrap(),
        Response::Done {}
    );
    // Chunk sizes that cut samples in half, as Hermes's chunks do.
    let pcm = sine(24_000, 1.5);
    let writer = {
        let (port, chat) = (port.clone(), chat.clone());
        tokio::spawn(async move {
            let mut rest = &pcm[..];
            for size in [1usize, 4_001, 333, 7_777, 3, 12_345, 999].iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (chunk, after) = rest.split_at((*size).min(rest.len()));
                rest = after;
                let answer = port.request(&chat, write("r1", chunk)).await;
                assert_eq!(answer.unwrap(), Response::Done {});
            }
            let end = op("speech_end", json!({"speech_id": "r1"}));
            assert_eq!(port.request(&chat, end).await.unwrap(), Response::Done {});
        })
    };
    let (rate, frames, end) = hear(&mut conn).await;
    writer.await.unwrap();
    assert_eq!(rate, 16_000);
    assert!(matches!(end, ServerMessage::AudioEnd(_)), "{end:?}");
    let samples: Vec<i16> = frames.iter().flat_map(|(_, s)| s.clone()).collect();
    assert!(
        (24_000 - 640..=24_000 + 640).contains(&samples.len()),
        "{} samples for 1.5 s",
        samples.len()
    );
    for (_, frame) in &frames[..frames.len() - 1] {
        assert_eq!(frame.len(), 640, "40 ms frames");
    }
    // A clean 440 Hz sine at 16 kHz moves at most A·2π·440/16000 ≈ 2073 per sample; a
    // lost or doubled byte at a chunk edge jumps by thousands.
    let max_step = AMPLITUDE * 2.0 * std::f64::consts::PI * 440.0 / 16_000.0;
    let edge = 320;
    let worst = samples[edge..samples.len() - edge]
        .windows(2)
        .map(|w| (i32::from(w[1]) - i32::from(w[0])).abs())
        .max()
        .unwrap();
    assert!(
        f64::from(worst) <= max_step * 1.05 + 16.0,
        "a click: a step of {worst}"
    );
    // Never more than half a second ahead of real time: frame n arrives no earlier than
    // its playing time minus the lead (a slow machine only makes frames later).
    let first = frames[0].0;
    for (n, (at, _)) in frames.iter().enumerate() {
        let plays = Duration::from_millis(40 * n as u64);
        let earliest = plays.saturating_sub(Duration::from_millis(500) + READER_STALL);
        assert!(
            at.duration_since(first) >= earliest,
            "frame {n} came too early"
        );
    }
    // Nothing follows the end but what the test sends for.
    conn.send_raw(r#"{"type":"ping","ts":1}"#).await;
    match conn.next().await {
        Incoming::Msg(ServerMessage::Pong(_)) => {}
        Incoming::Frame(_) => panic!("a frame after audio.end"),
        Incoming::Msg(other) => panic!("after audio.end: {other:?}"),
    }
}

#[tokio::test]
async fn writes_wait_for_room_and_talking_over_the_reply_stops_it() {
    let (_h, port, mut inbox, mut conn, chat) = setup(Some(16_000)).await;
    let begin = json!({"speech_id": "r2", "sample_rate": 8000, "channels": 1});
    port.request(&chat, op("speech_begin", begin))
        .await
        .unwrap();
    // Three seconds of 8 kHz mono fill the buffer: the first chunk goes to the resampler
    // at once, the second waits in the buffer, and the third must wait for room.
    for _ in 0..2 {
        let answer = port.request(&chat, write("r2", &sine(8_000, 3.0))).await;
        assert_eq!(answer.unwrap(), Response::Done {});
    }
    let third = {
        let (port, chat) = (port.clone(), chat.clone());
        tokio::spawn(async move {
            let answer = port.request(&chat, write("r2", &sine(8_000, 0.1))).await;
            (Instant::now(), answer)
        })
    };
    let stream = conn
        .until(|m| match m {
            ServerMessage::AudioStart(start) => Some(start.stream),
            _ => None,
        })
        .await;
    let started = Instant::now();
    let (answered, answer) = tokio::time::timeout(WAIT, third).await.unwrap().unwrap();
    assert_eq!(answer.unwrap(), Response::Done {});
    // Room comes only once the resampler took the second chunk: the first three seconds
    // less what is decoded ahead (0.64 s) and the lead (0.5 s) have been paced out.
    assert!(
        answered.duration_since(started) >= Duration::from_millis(1_500),
        "answered after {:?}",
        answered.duration_since(started)
    );

    // The user speaks: the reply stops and the agent hears why.
    conn.send_raw(
        &json!({"type": "audio.start", "stream": 7, "rate": 16000, "format": "pcm16"}).to_string(),
    )
    .await;
    loop {
        match conn.next().await {
            Incoming::Msg(ServerMessage::AudioAbort(abort)) => {
                assert_eq!(abort.stream, stream);
                break;
            }
            Incoming::Msg(ServerMessage::AudioEnd(_)) => panic!("played to the end"),
            _ => {}
        }
    }
    let stopped = tokio::time::timeout(WAIT, inbox.recv())
        .await
        .unwrap()
        .unwrap();
    let InboundBody::SpeechStopped { speech_id, reason } = stopped.body else {
        panic!("{:?}", stopped.body)
    };
    assert_eq!(speech_id.as_str(), "r2");
    assert_eq!(serde_json::to_value(reason).unwrap(), json!("interrupted"));
    // Later writes are dropped quietly, and nothing more is played.
    let late = port.request(&chat, write("r2", &sine(8_000, 0.5))).await;
    assert_eq!(late.unwrap(), Response::Dropped { dropped: true });
    let end = op("speech_end", json!({"speech_id": "r2"}));
    assert_eq!(port.request(&chat, end).await.unwrap(), Response::Done {});
    conn.send_raw(r#"{"type":"ping","ts":1}"#).await;
    loop {
        match conn.next().await {
            Incoming::Msg(ServerMessage::Pong(_)) => break,
            Incoming::Frame(data) => {
                let (header, _) = decode_frame(&data).unwrap();
                panic!("a frame of stream {} after the abort", header.stream)
            }
            Incoming::Msg(ServerMessage::AudioStart(start)) => panic!("{start:?}"),
            Incoming::Msg(_) => {}
        }
    }
}

#[tokio::test]
async fn files_at_other_rates_join_the_stream_in_order() {
    let (h, port, _inbox, mut conn, chat) = setup(Some(16_000)).await;
    let begin = json!({"speech_id": "r3", "sample_rate": 24000, "channels": 2});
    port.request(&chat, op("speech_begin", begin))
        .await
        .unwrap();
    let (one, two) = (h.dir.path().join("one.wav"), h.dir.path().join("two.wav"));
    herald_media::wav::write_wav(&one, 22_050, &sine(22_050, 0.5)).unwrap();
    herald_media::wav::write_wav(&two, 8_000, &sine(8_000, 0.25)).unwrap();
    for path in [&one, &two] {
        let file = op("speech_file", json!({"speech_id": "r3", "path": path}));
        assert_eq!(port.request(&chat, file).await.unwrap(), Response::Done {});
        // Opened before the answer: the caller may remove it at once.
        std::fs::remove_file(path).unwrap();
    }
    let missing = op(
        "speech_file",
        json!({"speech_id": "r3", "path": h.dir.path().join("gone.wav")}),
    );
    assert!(port.request(&chat, missing).await.is_err());
    let end = op("speech_end", json!({"speech_id": "r3"}));
    port.request(&chat, end).await.unwrap();
    let (rate, frames, end) = hear(&mut conn).await;
    assert_eq!(rate, 16_000);
    assert!(matches!(end, ServerMessage::AudioEnd(_)), "{end:?}");
    // 0.5 s + 0.25 s at 16 kHz, give or take a frame.
    let samples = total(&frames);
    assert!(
        (12_000 - 640..=12_000 + 640).contains(&samples),
        "{samples}"
    );
}

#[tokio::test]
async fn devices_that_cannot_play_a_stream_refuse_it() {
    let (h, port, _inbox, _conn, chat) = setup(None).await;
    let begin = json!({"speech_id": "r4", "sample_rate": 24000, "channels": 1});
    let unsupported = |answer: Result<Response, RequestError>| {
        matches!(
            answer,
            Err(RequestError::Delivery(DeliveryError::Unsupported { .. }))
        )
    };
    let answer = port.request(&chat, op("speech_begin", begin.clone())).await;
    assert!(unsupported(answer.clone()), "{answer:?}");
    // Nothing began, so a write has nothing to join.
    let answer = port.request(&chat, write("r4", &[0; 10])).await;
    assert_eq!(answer.unwrap(), Response::Dropped { dropped: true });

    let (_phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let phone = Chat::mobile("tel-1");
    for request in [
        op("speech_begin", begin),
        write("r4", &[0; 10]),
        op("speech_end", json!({"speech_id": "r4"})),
    ] {
        let answer = port.request(&phone, request).await;
        assert!(unsupported(answer.clone()), "{answer:?}");
    }
}
