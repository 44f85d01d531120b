//! What a phone's upload costs before it is written: decoding a full `media` chunk (3 MiB
//! of file, 4 MiB of base64) and then its bytes. Run with
//! `cargo bench -p herald-mobile-proto`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use herald_mobile_proto::{encode_base64, limits::MEDIA_CHUNK_BYTES, ClientFrame};

/// A chunk of a photo: bytes that do not repeat, so no stage can take a shortcut.
fn chunk() -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    (0..MEDIA_CHUNK_BYTES)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn media(c: &mut Criterion) {
    let bytes = chunk();
    let frame = format!(
        r#"{{"t":"media","id":"m-1","kind":"image","mime":"image/jpeg","filename":"IMG_0001.jpg","data":"{}","part":0,"parts":2}}"#,
        encode_base64(&bytes)
    );
    let decoded = |text: &str| match ClientFrame::decode(text) {
        Ok(ClientFrame::Media(media)) => media,
        other => panic!("not a media frame: {other:?}"),
    };
    assert_eq!(decoded(&frame).bytes().ok().as_deref(), Some(&bytes[..]));

    let mut group = c.benchmark_group("phone upload");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("decode frame", |b| b.iter(|| decoded(black_box(&frame))));
    let media = decoded(&frame);
    group.bench_function("decode base64", |b| b.iter(|| black_box(&media).bytes()));
    group.bench_function("encode base64", |b| {
        b.iter(|| encode_base64(black_box(&bytes)))
    });
    group.finish();
}

criterion_group!(benches, media);
criterion_main!(benches);
