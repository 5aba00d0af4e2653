//! Frames between a node process and its successor over their Unix stream socket pair: a
//! kind byte, a 32-bit big-endian length and that many payload bytes; a frame may carry
//! descriptors (`SCM_RIGHTS`) on its header. JSON payloads say what the kinds mean
//! (`upgrade/mod.rs`), code frames carry WebAssembly module bytes.
//!
//! Contract: [`recv`] never trusts the other side: an unknown kind, a length over
//! [`MAX_FRAME`], more than [`MAX_FDS`] descriptors or a stream that ends inside a frame is an
//! error, and nothing it received leaks (descriptors it got are closed when dropped).

use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, recvmsg, sendmsg,
};

/// The largest payload accepted (a 64 MiB code object, or a node's state, fits).
pub const MAX_FRAME: usize = 256 << 20;
/// The most descriptors one frame carries.
pub const MAX_FDS: usize = 4;

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Successor -> node: it runs and is ready for code (JSON `Hello`).
    Hello = 1,
    /// Node -> successor: one code object's module bytes.
    Code = 2,
    /// Node -> successor: no more code.
    CodeEnd = 3,
    /// Successor -> node: the code is built (JSON `Prepared`).
    Prepared = 4,
    /// Node -> successor: the paused node's state, with its sockets (JSON `StateMsg`).
    State = 5,
    /// Successor -> node: it runs the node now (JSON `TookOver`).
    TookOver = 6,
    /// Either way: it gives up, and why (JSON `Failed`).
    Failed = 7,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Hello,
            2 => Kind::Code,
            3 => Kind::CodeEnd,
            4 => Kind::Prepared,
            5 => Kind::State,
            6 => Kind::TookOver,
            7 => Kind::Failed,
            _ => return None,
        })
    }
}

/// One frame received.
#[derive(Debug)]
pub struct Frame {
    /// Its kind.
    pub kind: Kind,
    /// Its payload.
    pub payload: Vec<u8>,
    /// The descriptors it carried, in the order they were sent.
    pub fds: Vec<OwnedFd>,
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Sends one frame, `fds` on its header.
pub fn send(
    sock: &UnixStream,
    kind: Kind,
    payload: &[u8],
    fds: &[BorrowedFd<'_>],
) -> io::Result<()> {
    if payload.len() > MAX_FRAME || fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "frame over its bounds",
        ));
    }
    let len = u32::try_from(payload.len()).map_err(|_| invalid("frame too long".into()))?;
    let mut head = [0u8; 5];
    head[0] = kind as u8;
    head[1..].copy_from_slice(&len.to_be_bytes());
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(invalid("descriptors do not fit the control message".into()));
    }
    // The descriptors ride on the first byte sent; the rest of the header follows if the
    // kernel took only part of it.
    let mut sent = sendmsg(
        sock,
        &[IoSlice::new(&head)],
        &mut control,
        SendFlags::empty(),
    )?;
    while sent < head.len() {
        let rest = head.get(sent..).unwrap_or(&[]);
        sent += (&*sock).write(rest)?;
    }
    (&*sock).write_all(payload)?;
    (&*sock).flush()
}

/// Sends a JSON frame.
pub fn send_json<T: serde::Serialize>(
    sock: &UnixStream,
    kind: Kind,
    v: &T,
    fds: &[BorrowedFd<'_>],
) -> io::Result<()> {
    let bytes = serde_json::to_vec(v).map_err(io::Error::other)?;
    send(sock, kind, &bytes, fds)
}

/// Receives one frame (blocking, within the socket's read timeout).
pub fn recv(sock: &UnixStream) -> io::Result<Frame> {
    let mut head = [0u8; 5];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = {
        let mut iov = [IoSliceMut::new(&mut head)];
        recvmsg(
            sock.as_fd(),
            &mut iov,
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        )?
        .bytes
    };
    let mut fds = Vec::new();
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = msg {
            fds.extend(rights);
        }
    }
    if got == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the other process closed the connection",
        ));
    }
    if fds.len() > MAX_FDS {
        return Err(invalid(format!("{} descriptors in one frame", fds.len())));
    }
    if got < head.len() {
        (&*sock).read_exact(head.get_mut(got..).unwrap_or(&mut []))?;
    }
    let [k, l0, l1, l2, l3] = head;
    let kind = Kind::from_byte(k).ok_or_else(|| invalid(format!("unknown frame kind {k}")))?;
    let len = u32::from_be_bytes([l0, l1, l2, l3]) as usize;
    if len > MAX_FRAME {
        return Err(invalid(format!("a frame of {len} bytes")));
    }
    let mut payload = vec![0u8; len];
    (&*sock).read_exact(&mut payload)?;
    Ok(Frame { kind, payload, fds })
}

/// Receives a frame that must be of `kind` with a JSON payload; a `Failed` frame from the
/// other side is an error carrying its reason.
pub fn recv_json<T: serde::de::DeserializeOwned>(
    sock: &UnixStream,
    kind: Kind,
) -> io::Result<(T, Vec<OwnedFd>)> {
    let f = recv(sock)?;
    expect_json(f, kind)
}

/// Checks a frame received is `kind` and parses its JSON payload.
pub fn expect_json<T: serde::de::DeserializeOwned>(
    f: Frame,
    kind: Kind,
) -> io::Result<(T, Vec<OwnedFd>)> {
    if f.kind == Kind::Failed {
        let why: super::Failed = serde_json::from_slice(&f.payload)
            .unwrap_or_else(|_| super::Failed::new("(unreadable reason)"));
        return Err(io::Error::other(why.message));
    }
    if f.kind != kind {
        return Err(invalid(format!(
            "expected a {kind:?} frame, got {:?}",
            f.kind
        )));
    }
    let v = serde_json::from_slice(&f.payload)
        .map_err(|e| invalid(format!("a {kind:?} frame that does not parse: {e}")))?;
    Ok((v, f.fds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn frames_carry_payloads_and_descriptors() {
        let (a, b) = UnixStream::pair().unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        send(&a, Kind::State, b"{\"x\":1}", &[udp.as_fd()]).unwrap();
        // Bigger than the socket buffer: sent while the other end reads.
        let big = std::thread::spawn(move || send(&a, Kind::Code, &vec![7u8; 300_000], &[]));
        let f = recv(&b).unwrap();
        assert_eq!(f.kind, Kind::State);
        assert_eq!(f.payload, b"{\"x\":1}");
        assert_eq!(f.fds.len(), 1);
        assert_ne!(f.fds[0].as_raw_fd(), udp.as_raw_fd());
        let got = std::net::UdpSocket::from(f.fds.into_iter().next().unwrap());
        assert_eq!(got.local_addr().unwrap().port(), port, "the same socket");
        let f = recv(&b).unwrap();
        assert_eq!((f.kind, f.payload.len()), (Kind::Code, 300_000));
        big.join().unwrap().unwrap();
    }

    #[test]
    fn bad_frames_are_errors() {
        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(&[99, 0, 0, 0, 1, 0]).unwrap();
        assert!(
            recv(&b)
                .unwrap_err()
                .to_string()
                .contains("unknown frame kind 99")
        );
        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(&[2, 0xff, 0xff, 0xff, 0xff]).unwrap();
        assert!(recv(&b).unwrap_err().to_string().contains("bytes"));
        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(&[2, 0, 0, 0, 9, 1, 2]).unwrap();
        drop(a);
        assert!(recv(&b).is_err(), "a stream that ends inside a frame");
        let (a, b) = UnixStream::pair().unwrap();
        send_json(&a, Kind::Failed, &super::super::Failed::new("no"), &[]).unwrap();
        let e = recv_json::<serde_json::Value>(&b, Kind::Hello).unwrap_err();
        assert_eq!(e.to_string(), "no");
        drop(a);
        assert_eq!(recv(&b).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }
}
