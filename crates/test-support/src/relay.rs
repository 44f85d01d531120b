//! A port a test owns for its whole life, in front of a server that restarts.
//!
//! A test that stops a server and starts it again must not let go of the port its
//! clients reconnect to: between the two, any other test's socket may take it. So the
//! server listens on a free port of its own each time (port 0), and the clients connect
//! to a [`Relay`], which holds one listening socket from start to drop and forwards each
//! connection to wherever the server is now. While it points nowhere (the server is
//! down), it accepts and closes at once, as a client of a stopped server would see.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;
use std::thread;

/// A listening port on 127.0.0.1 that forwards to a server's port, held until dropped.
pub struct Relay {
    addr: SocketAddr,
    target: Arc<AtomicU16>,
    stopped: Arc<AtomicBool>,
}

impl Relay {
    /// A new port, pointing nowhere yet.
    pub fn start() -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let target = Arc::new(AtomicU16::new(0));
        let stopped = Arc::new(AtomicBool::new(false));
        let (to, stop) = (target.clone(), stopped.clone());
        thread::spawn(move || {
            for client in listener.incoming() {
                if stop.load(Ordering::Acquire) {
                    return;
                }
                let Ok(client) = client else { continue };
                match to.load(Ordering::Acquire) {
                    0 => drop(client),
                    port => forward(client, port),
                }
            }
        });
        Relay {
            addr,
            target,
            stopped,
        }
    }

    /// The port clients use.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Forward new connections to the server on `port` of 127.0.0.1 (0: nowhere).
    pub fn point_to(&self, port: u16) {
        self.target.store(port, Ordering::Release);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::Release);
        // Wake the accept loop so it sees the flag and lets go of the port.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Both directions of one connection, each on its own thread; when one side ends,
/// the other hears it.
fn forward(client: TcpStream, port: u16) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", port)) else {
        return; // the server is going or gone: the client sees its connection close
    };
    let (Ok(client_rx), Ok(server_rx)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    thread::spawn(move || pipe(client_rx, server));
    thread::spawn(move || pipe(server_rx, client));
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo_server() -> (TcpListener, u16) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        (listener, port)
    }

    #[test]
    fn forwards_to_wherever_the_server_is_now_and_closes_while_it_is_nowhere() {
        let relay = Relay::start();
        // Nowhere: accepted, then closed.
        let mut early = TcpStream::connect(("127.0.0.1", relay.port())).unwrap();
        assert_eq!(early.read(&mut [0u8; 1]).unwrap(), 0);

        for round in 0..2u8 {
            let (server, port) = echo_server();
            relay.point_to(port);
            let mut client = TcpStream::connect(("127.0.0.1", relay.port())).unwrap();
            let (mut accepted, _) = server.accept().unwrap();
            client.write_all(&[round]).unwrap();
            let mut got = [0u8; 1];
            accepted.read_exact(&mut got).unwrap();
            assert_eq!(got, [round]);
            accepted.write_all(b"ok").unwrap();
            // The server goes: the client hears the end.
            drop(accepted);
            drop(server);
            let mut reply = Vec::new();
            client.read_to_end(&mut reply).unwrap();
            assert_eq!(reply, b"ok");
        }
    }
}
