//! Notifications while the app is closed (Web Push), as the phone core sees them: which
//! subscriptions it keeps, and what it would tell a person who is not looking.
//!
//! A subscription is kept only for a user the authorizer allows (it waits behind the
//! same gate as a message), and only once its keys are a P-256 point and a 16-byte
//! secret and its endpoint is `https://` on a public host: an endpoint is a URL Herald
//! will call, so one that names this machine or the owner's network (a literal private
//! or loopback address, `localhost`) is refused unless the owner allows it. Names that
//! resolve to such addresses are the sender's to refuse, when it resolves them.
//!
//! The core hands back a [`Note`] when something worth a notification happens while
//! its app is away (not connected, or out of sight); the shell sends it if none of the
//! user's other apps is in sight either. [`question_note`] is what a question says.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::note::{Note, NoteKind, NoteOption};
use base64_simd::URL_SAFE_NO_PAD;
use herald_mobile_proto::{PromptCard, PushSubscription};

/// A subscription that passed every check, keys decoded.
#[derive(Clone, PartialEq, Eq)]
pub struct Subscription {
    pub endpoint: String,
    /// The app's P-256 public key, uncompressed (65 bytes).
    pub p256dh: Vec<u8>,
    /// The app's auth secret (16 bytes).
    pub auth: Vec<u8>,
}

/// Never the endpoint (a capability URL) or the keys in a log.
impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Subscription(<redacted>)")
    }
}

/// Why a subscription is refused, for the app's `error{bad_frame}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubscriptionError {
    #[error("keys.p256dh must be an uncompressed P-256 public key (65 bytes, base64url, a point on the curve)")]
    PublicKey,
    #[error("keys.auth must be 16 bytes, base64url")]
    Auth,
    #[error("the endpoint must be an https:// URL")]
    Scheme,
    #[error("the endpoint is not a URL with a host")]
    Host,
    #[error("the endpoint is on this machine or a private network")]
    Private,
}

/// Check `sub`; `allow_private` lets an endpoint on a private or loopback address (and
/// plain `http://` there) through, for a push service on the owner's own network.
pub fn check(
    sub: &PushSubscription,
    allow_private: bool,
) -> Result<Subscription, SubscriptionError> {
    let p256dh = URL_SAFE_NO_PAD
        .decode_to_vec(sub.keys.p256dh.trim_end_matches('='))
        .ok()
        .filter(|key| key.len() == 65 && p256::PublicKey::from_sec1_bytes(key).is_ok())
        .ok_or(SubscriptionError::PublicKey)?;
    let auth = URL_SAFE_NO_PAD
        .decode_to_vec(sub.keys.auth.trim_end_matches('='))
        .ok()
        .filter(|auth| auth.len() == 16)
        .ok_or(SubscriptionError::Auth)?;
    let (secure, rest) = match sub.endpoint.split_once("://") {
        Some(("https", rest)) => (true, rest),
        Some(("http", rest)) if allow_private => (false, rest),
        _ => return Err(SubscriptionError::Scheme),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() || authority.contains('@') {
        return Err(SubscriptionError::Host);
    }
    let host = host_of(authority).ok_or(SubscriptionError::Host)?;
    let private = is_private_host(&host);
    if private && !allow_private {
        return Err(SubscriptionError::Private);
    }
    if !secure && !private {
        return Err(SubscriptionError::Scheme);
    }
    Ok(Subscription {
        endpoint: sub.endpoint.clone(),
        p256dh,
        auth,
    })
}

/// The host of `authority` (`host`, `host:port`, `[v6]`, `[v6]:port`), lower case.
fn host_of(authority: &str) -> Option<String> {
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split_once(']')?.0,
        None => authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host),
    };
    let valid = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'));
    valid.then(|| host.to_ascii_lowercase())
}

/// `localhost` and its subdomains, and addresses that are not on the public internet.
fn is_private_host(host: &str) -> bool {
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    host.parse::<IpAddr>().is_ok_and(|ip| is_private_ip(&ip))
}

/// Loopback, private, link-local, unspecified, shared (CGNAT) and unique-local
/// addresses, and IPv4 mapped into IPv6.
pub fn is_private_ip(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_private_v4(&v4),
            None => is_private_v6(v6),
        },
    }
}

fn is_private_v4(ip: &Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || (a == 100 && (64..128).contains(&b))
}

fn is_private_v6(ip: &Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
}

/// The notification for question `card`, shown on `device`; `asked_by` names the
/// device that asked, when it is another.
pub fn question_note(card: &PromptCard, asked_by: Option<&str>, device: &str) -> Note {
    let (title, body) = match asked_by {
        Some(asker) => {
            let prefix = format!("{asker} asks: ");
            let body = card.text.strip_prefix(&prefix).unwrap_or(&card.text);
            (format!("{asker} asks"), body.to_owned())
        }
        None => ("Question".to_owned(), card.text.clone()),
    };
    let options = card.options.iter().map(|option| NoteOption {
        id: option.id.clone(),
        label: option.label.clone(),
    });
    Note {
        kind: NoteKind::Question,
        title,
        body,
        tag: format!("q-{}", card.id),
        device: device.to_owned(),
        message_id: None,
        prompt_id: Some(card.id.clone()),
        options: options.collect(),
    }
}

#[cfg(test)]
mod tests {
    use herald_mobile_proto::PushKeys;

    use super::*;

    /// The generator of P-256, uncompressed: a point on the curve.
    const POINT: &str =
        "BGsX0fLhLEJH-Lzm5WOkQPJ3A32BLeszoPShOUXYmMKWT-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU";

    fn sub(endpoint: &str) -> PushSubscription {
        PushSubscription {
            endpoint: endpoint.into(),
            keys: PushKeys {
                p256dh: POINT.to_owned(),
                auth: URL_SAFE_NO_PAD.encode_to_string([1u8; 16]),
            },
        }
    }

    #[test]
    fn only_a_public_https_endpoint_with_sound_keys_is_kept() {
        let kept = check(&sub("https://push.example.net/send/abc"), false).unwrap();
        assert_eq!((kept.p256dh.len(), kept.auth.len()), (65, 16));
        for (endpoint, why) in [
            ("http://push.example.net/x", SubscriptionError::Scheme),
            ("ftp://push.example.net/x", SubscriptionError::Scheme),
            ("https://127.0.0.1:8443/x", SubscriptionError::Private),
            ("https://10.1.2.3/x", SubscriptionError::Private),
            ("https://192.168.0.9/x", SubscriptionError::Private),
            ("https://100.64.0.1/x", SubscriptionError::Private),
            ("https://[::1]/x", SubscriptionError::Private),
            ("https://[fd00::1]:443/x", SubscriptionError::Private),
            ("https://[::ffff:127.0.0.1]/x", SubscriptionError::Private),
            ("https://localhost/x", SubscriptionError::Private),
            ("https://printer.localhost/x", SubscriptionError::Private),
            ("https://user@push.example.net/x", SubscriptionError::Host),
            ("https:///x", SubscriptionError::Host),
            ("https://bad host/x", SubscriptionError::Host),
        ] {
            assert_eq!(check(&sub(endpoint), false), Err(why), "{endpoint}");
        }
        // The owner's own push service, when allowed; plain http only there.
        assert!(check(&sub("http://127.0.0.1:9000/push/1"), true).is_ok());
        assert_eq!(
            check(&sub("http://push.example.net/x"), true),
            Err(SubscriptionError::Scheme)
        );
    }

    #[test]
    fn keys_that_are_not_a_point_and_a_secret_are_refused() {
        let mut bad = sub("https://push.example.net/x");
        bad.keys.p256dh = URL_SAFE_NO_PAD.encode_to_string([4u8; 33]);
        assert_eq!(check(&bad, false), Err(SubscriptionError::PublicKey));
        let mut off_the_curve = [0u8; 65];
        off_the_curve[0] = 4;
        bad.keys.p256dh = URL_SAFE_NO_PAD.encode_to_string(off_the_curve);
        assert_eq!(check(&bad, false), Err(SubscriptionError::PublicKey));
        let mut bad = sub("https://push.example.net/x");
        bad.keys.auth = "not base64!".into();
        assert_eq!(check(&bad, false), Err(SubscriptionError::Auth));
    }
}
