//! What a session keeps of a connected device's `hello`: only what it reads later (its
//! name, its limits, its action manifest, already in the agent's terms, since every
//! message hands them on). Every connected gadget holds one, so its size is memory per
//! connection: the whole `hello` was more than twice as large.

use herald_gadget_proto as proto;
use herald_media::text::Charset;
use herald_port::{ActionSpec, Screen};

pub struct Peer {
    /// What the device calls itself (cleaned in the handshake).
    pub name: Option<Box<str>>,
    /// Firmware images must name this board.
    pub board: Option<Box<str>>,
    pub charset: Charset,
    pub screen: Option<Screen>,
    /// The box pictures are fitted into; none, no pictures.
    pub image_box: Option<(u32, u32)>,
    /// None: no speaker, so no speech.
    pub speaker_rate: Option<u32>,
    /// None: the device does not install firmware updates.
    pub ota_max_size: Option<u64>,
    pub actions: Box<[ActionSpec]>,
}

impl From<proto::Hello> for Peer {
    fn from(hello: proto::Hello) -> Peer {
        let display = hello.caps.display.as_ref();
        Peer {
            name: hello.name.map(String::into_boxed_str),
            board: hello.board.map(String::into_boxed_str),
            charset: Charset::from_caps(display.and_then(|d| d.charset.as_deref())),
            screen: display.map(|d| Screen {
                width: d.width,
                height: d.height,
                text_cols: d.text_cols,
                text_rows: d.text_rows,
            }),
            image_box: display
                .and_then(|d| d.image.as_ref())
                .map(|b| (b.width, b.height)),
            speaker_rate: hello.caps.speaker.as_ref().map(|s| s.rate),
            ota_max_size: hello.caps.ota.as_ref().map(|o| o.max_size),
            actions: hello.actions.into_iter().map(action_spec).collect(),
        }
    }
}

/// An action as the agent's tools take it: a missing description is empty, missing
/// parameters an empty object schema.
fn action_spec(action: proto::ActionSpec) -> ActionSpec {
    ActionSpec {
        name: action.name,
        description: action.description.unwrap_or_default(),
        params: action
            .params
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
    }
}
