//! Accepting connections and serving one: a reader thread that answers requests in order and
//! a writer thread that writes the connection's queue.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver};

use anode_ctl::{ErrorCode, ServerMessage, parse_request};

use super::handlers::{self, ConnState};
use super::state::{CONN_QUEUE, ConnOut, Shared};

/// Longest request line accepted; a longer one is answered with an error and skipped.
const MAX_LINE: usize = 1 << 20;

/// Accepts until the server stops.
pub(super) fn accept_loop(shared: &Arc<Shared>, listener: &UnixListener) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::Acquire) {
            break;
        }
        match stream {
            Ok(s) => {
                if let Err(e) = start(shared, s) {
                    tracing::warn!("control connection not started: {e}");
                }
            }
            Err(e) => {
                tracing::warn!("control accept failed: {e}");
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
}

fn start(shared: &Arc<Shared>, stream: UnixStream) -> std::io::Result<()> {
    let (tx, rx) = mpsc::sync_channel(CONN_QUEUE);
    let writer = stream.try_clone()?;
    let id = shared.add_conn(ConnOut {
        tx: tx.clone(),
        stream: stream.try_clone()?,
        subscribed: false,
    });
    let w = std::thread::Builder::new()
        .name(format!("anode-ctl-w{id}"))
        .spawn(move || write_loop(writer, &rx));
    if let Err(e) = w {
        shared.release_conn(id);
        return Err(e);
    }
    let sh = Arc::clone(shared);
    let r = std::thread::Builder::new()
        .name(format!("anode-ctl-r{id}"))
        .spawn(move || {
            let mut st = ConnState::new(id);
            read_loop(&sh, &mut st, stream, &tx);
            sh.release_conn(id);
            tracing::debug!(conn = id, client = %st.client, "control connection closed");
        });
    if let Err(e) = r {
        shared.release_conn(id);
        return Err(e);
    }
    Ok(())
}

fn write_loop(mut w: UnixStream, rx: &Receiver<ServerMessage>) {
    while let Ok(m) = rx.recv() {
        if w.write_all(m.to_line().as_bytes()).is_err() {
            break;
        }
    }
    let _ = w.shutdown(std::net::Shutdown::Both);
}

fn read_loop(
    shared: &Shared,
    st: &mut ConnState,
    stream: UnixStream,
    tx: &mpsc::SyncSender<ServerMessage>,
) {
    let mut r = BufReader::new(stream);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = match (&mut r)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
        {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let reply = if n > MAX_LINE && buf.last() != Some(&b'\n') {
            // Skip the rest of the overlong line.
            let mut sink = Vec::new();
            if r.read_until(b'\n', &mut sink).is_err() {
                return;
            }
            ServerMessage::error(
                None,
                ErrorCode::BadRequest,
                format!("request line longer than {MAX_LINE} bytes"),
            )
        } else {
            let line = String::from_utf8_lossy(&buf);
            if line.trim().is_empty() {
                continue;
            }
            match parse_request(&line) {
                Ok(f) => handlers::handle(shared, st, f),
                Err((id, msg)) => ServerMessage::error(id, ErrorCode::BadRequest, msg),
            }
        };
        if tx.send(reply).is_err() {
            return;
        }
    }
}
