//! What decoding a device's frames costs: the handshake's `hello`, the frames of a turn
//! and a heartbeat. Run with `cargo bench -p herald-gadget-proto`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use herald_gadget_proto::DeviceMessage;

/// A production-sized `hello`: screen, audio, buttons and a manifest of four actions.
const HELLO: &str = r#"{"type":"hello","proto":1,"device_id":"hg-630dcd2966c43366","name":"Kitchen","board":"esp32s3-box3","firmware":"1.4.2","caps":{"display":{"width":320,"height":240,"color":true,"max_chars":400},"mic":{"rate":16000,"format":"pcm16"},"speaker":{"rate":16000,"format":"pcm16"},"buttons":["talk","cancel","up","down"],"ota":{"max_size":3145728}},"actions":[{"name":"led.set","description":"Set the ring light to a colour","params":{"type":"object","properties":{"color":{"type":"string"}},"required":["color"]}},{"name":"speaker.volume","description":"Set the speaker volume, 0 to 100","params":{"type":"object","properties":{"level":{"type":"integer"}}}},{"name":"screen.brightness","description":"Set the screen brightness, 0 to 100","params":{"type":"object","properties":{"level":{"type":"integer"}}}},{"name":"timer.start","description":"Start a countdown shown on the screen","params":{"type":"object","properties":{"seconds":{"type":"integer"}}}}],"sensors":{"battery":87,"temp_c":21.5,"wifi_rssi":-61}}"#;

const FRAMES: &[(&str, &str)] = &[
    ("hello", HELLO),
    (
        "auth",
        r#"{"type":"auth","mac":"q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80="}"#,
    ),
    (
        "text",
        r#"{"type":"text","id":"m-17","text":"What's the weather like tomorrow?"}"#,
    ),
    (
        "audio.start",
        r#"{"type":"audio.start","stream":3,"rate":16000,"format":"pcm16","id":"u-9"}"#,
    ),
    (
        "state",
        r#"{"type":"state","sensors":{"battery":86,"temp_c":21.4}}"#,
    ),
    ("ping", r#"{"type":"ping","ts":1764590000000}"#),
];

fn decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("gadget decode");
    for (name, frame) in FRAMES {
        assert!(
            !matches!(
                DeviceMessage::decode(frame),
                Ok(DeviceMessage::Unknown(_)) | Err(_)
            ),
            "{name} must decode"
        );
        group.throughput(Throughput::Bytes(frame.len() as u64));
        group.bench_function(*name, |b| {
            b.iter(|| DeviceMessage::decode(black_box(frame)))
        });
    }
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
