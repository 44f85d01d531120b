//! Addresses people can type into a device: the LAN address instead of `0.0.0.0`.

use std::net::{IpAddr, SocketAddr};

/// The first non-loopback IPv4 address of this machine, if it has one.
pub fn lan_address() -> Option<IpAddr> {
    let interfaces = if_addrs::get_if_addrs().ok()?;
    interfaces
        .into_iter()
        .filter(|i| !i.is_loopback())
        .map(|i| i.ip())
        .find(IpAddr::is_ipv4)
}

/// `scheme://host:port/path`, where an unspecified host becomes the LAN address (or
/// loopback on a machine without one).
pub fn url(scheme: &str, addr: SocketAddr, path: &str) -> String {
    let host = if addr.ip().is_unspecified() {
        lan_address().unwrap_or(IpAddr::from([127, 0, 0, 1]))
    } else {
        addr.ip()
    };
    match host {
        IpAddr::V6(v6) => format!("{scheme}://[{v6}]:{}{path}", addr.port()),
        IpAddr::V4(v4) => format!("{scheme}://{v4}:{}{path}", addr.port()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_specific_hosts() {
        let addr: SocketAddr = "127.0.0.1:8765".parse().unwrap();
        assert_eq!(url("ws", addr, "/gadget"), "ws://127.0.0.1:8765/gadget");
        let addr: SocketAddr = "[::1]:1".parse().unwrap();
        assert_eq!(url("wss", addr, "/g"), "wss://[::1]:1/g");
        let any: SocketAddr = "0.0.0.0:8765".parse().unwrap();
        assert!(!url("ws", any, "/gadget").contains("0.0.0.0"));
    }
}
