//! Driver behaviour: impairments, unknown peers, bounded events, calls, shutdown.

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anode_core::Event;
use anode_io::{DriverConfig, Impairment};
use anode_wire::NodeAddr;
use common::*;

const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

#[test]
fn loss_one_drops_everything() {
    let (a, b) = (free_addr(LO), free_addr(LO));
    let mut cfg = DriverConfig::new(a);
    let mut imp = Impairment::new(b);
    imp.loss = 1.0;
    cfg.impairments = vec![imp];
    let ha = anode_io::spawn(udp_node(a, &[b], true), cfg).expect("spawn");
    let hb = run(udp_node(b, &[a], true), b);
    let ev = hb.take_events().expect("events");
    let dst = NodeAddr::from(b);
    for i in 0..50u64 {
        let r = ha.call(move |n, now| n.send_datagram(now, dst, 1, i, None, b"lost"));
        assert_eq!(r, Ok(Ok(())));
    }
    assert!(next_delivery(&ev, Duration::from_millis(500)).is_none());
    let sa = ha.stats();
    assert!(sa.impairment_loss_drops >= 50, "{sa:?}");
    assert_eq!(sa.tx_datagrams, 0, "{sa:?}");
    assert_eq!(hb.stats().rx_datagrams, 0);
    // B's own egress is not impaired: A hears B's hellos.
    let end = Instant::now() + Duration::from_secs(2);
    while ha.stats().rx_datagrams == 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(ha.stats().rx_datagrams > 0, "A hears B");
    let nb = hb.shutdown();
    assert_eq!(nb.counters().delivered, 0);
    assert_eq!(nb.counters().rx_packets, 0);
}

#[test]
fn delay_impairment_delays() {
    let (a, b) = (free_addr(LO), free_addr(LO));
    let mut cfg = DriverConfig::new(a);
    let mut imp = Impairment::new(b);
    imp.delay = Duration::from_millis(150);
    cfg.impairments = vec![imp];
    let ha = anode_io::spawn(udp_node(a, &[b], true), cfg).expect("spawn");
    let hb = run(udp_node(b, &[a], true), b);
    let ev = hb.take_events().expect("events");
    let dst = NodeAddr::from(b);
    let t0 = Instant::now();
    let r = ha.call(move |n, now| n.send_datagram(now, dst, 1, 0, None, b"late"));
    assert_eq!(r, Ok(Ok(())));
    let d = next_delivery(&ev, Duration::from_secs(3)).expect("delivered");
    let took = t0.elapsed();
    assert_eq!(d.payload(), b"late");
    assert!(took >= Duration::from_millis(150), "took {took:?}");
    assert!(took < Duration::from_millis(1500), "took {took:?}");
}

#[test]
fn unknown_peers_are_counted_and_dropped() {
    let (a, b) = (free_addr(LO), free_addr(LO));
    let ha = run(udp_node(a, &[b], true), a);
    let stranger = std::net::UdpSocket::bind((LO, 0)).expect("bind");
    for _ in 0..3 {
        stranger.send_to(b"who am i", a).expect("send");
    }
    let end = Instant::now() + Duration::from_secs(3);
    while ha.stats().unknown_peer_drops < 3 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    let s = ha.stats();
    assert_eq!(s.unknown_peer_drops, 3, "{s:?}");
    let n = ha.shutdown();
    assert_eq!(n.counters().rx_packets, 0, "strangers never reach the node");
}

#[test]
fn full_event_channel_drops_and_counts() {
    let a = free_addr(LO);
    let mut cfg = DriverConfig::new(a);
    cfg.event_capacity = 2;
    let ha = anode_io::spawn(udp_node(a, &[], false), cfg).expect("spawn");
    let me = NodeAddr::from(a);
    for i in 0..10u64 {
        // Addressed to the node itself: delivered locally, so each makes one event.
        let r = ha.call(move |n, now| n.send_datagram(now, me, 5, i, None, b"self"));
        assert_eq!(r, Ok(Ok(())));
    }
    // Stats are published once per loop iteration: wait (bounded) for this one.
    let end = Instant::now() + Duration::from_secs(3);
    while ha.stats().calls < 10 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5));
    }
    let s = ha.stats();
    assert_eq!(s.event_drops, 8, "{s:?}");
    assert_eq!(s.calls, 10);
    let rx = ha.take_events().expect("events");
    let got: Vec<Event> = rx.try_iter().collect();
    assert_eq!(got.len(), 2);
    assert_eq!(ha.shutdown().counters().delivered, 10);
}

#[test]
fn call_runs_on_the_data_path_and_panics_propagate() {
    let a = free_addr(LO);
    let ha = run(udp_node(a, &[], false), a);
    let seen = Arc::new(AtomicU64::new(0));
    let s2 = Arc::clone(&seen);
    let addr = ha
        .call(move |n, _| {
            s2.store(1, Ordering::SeqCst);
            n.address()
        })
        .expect("alive");
    assert_eq!(addr, NodeAddr::from(a));
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    assert_eq!(ha.local_addr(), a);
    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ha.call(|_, _| -> u8 { panic!("boom in a call") })
    }));
    assert!(p.is_err(), "the panic reaches the caller");
    assert!(ha.is_running(), "the data path survives a panicking call");
    assert_eq!(ha.call(|_, _| 7), Ok(7));
    drop(ha);
}

#[test]
fn bad_config_is_invalid_input() {
    let mut cfg = DriverConfig::new(free_addr(LO));
    cfg.batch = 0;
    let e = anode_io::spawn(udp_node(cfg.bind, &[], false), cfg).expect_err("batch 0");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("1 to 1024"));
}

/// A paused data path reads nothing; the datagrams that arrive meanwhile wait in the socket,
/// and a second node started on the socket handed over (as `anode upgrade` does across
/// processes) receives every one of them.
#[test]
fn a_paused_node_reads_nothing_and_its_socket_serves_the_next() {
    let (a, b) = (free_addr(LO), free_addr(LO));
    let ha = run(udp_node(a, &[b], true), a);
    let hb = run(udp_node(b, &[a], true), b);
    assert!(wait_route(&ha, b, Duration::from_secs(5)), "route");
    let ev = ha.take_events().expect("events");
    ha.pause().expect("paused");
    let before = ha.stats().rx_datagrams;
    let dst = NodeAddr::from(a);
    for i in 0..20u64 {
        let r = hb.call(move |n, now| n.send_datagram(now, dst, 1, i, None, b"while paused"));
        assert_eq!(r, Ok(Ok(())));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(ha.stats().rx_datagrams, before, "nothing read while paused");
    assert!(next_delivery(&ev, Duration::from_millis(50)).is_none());
    // The successor: a fresh node on the same socket.
    let fd = ha.socket_fd().expect("fd");
    drop(ha.shutdown());
    let h2 = anode_io::spawn_on(udp_node(a, &[b], true), DriverConfig::new(a), Some(fd))
        .expect("adopts the socket");
    assert_eq!(h2.local_addr(), a);
    let ev2 = h2.take_events().expect("events");
    let mut got = 0;
    while next_delivery(&ev2, Duration::from_millis(500)).is_some() {
        got += 1;
    }
    assert_eq!(
        got, 20,
        "every datagram sent during the pause reaches the successor"
    );
    // A socket bound elsewhere is refused.
    let other = std::net::UdpSocket::bind((LO, 0)).expect("bind");
    let e = anode_io::spawn_on(
        udp_node(a, &[b], true),
        DriverConfig::new(a),
        Some(other.into()),
    )
    .expect_err("another port");
    assert!(e.to_string().contains("not to port"), "{e}");
}

/// Paused and resumed: the node goes on (timers, reads) as before.
#[test]
fn a_resumed_node_goes_on() {
    let (a, b) = (free_addr(LO), free_addr(LO));
    let ha = run(udp_node(a, &[b], true), a);
    let hb = run(udp_node(b, &[a], true), b);
    assert!(wait_route(&ha, b, Duration::from_secs(5)), "route");
    let ev = ha.take_events().expect("events");
    ha.pause().expect("paused");
    let dst = NodeAddr::from(a);
    let r = hb.call(move |n, now| n.send_datagram(now, dst, 1, 0, None, b"queued"));
    assert_eq!(r, Ok(Ok(())));
    std::thread::sleep(Duration::from_millis(100));
    assert!(next_delivery(&ev, Duration::from_millis(50)).is_none());
    ha.resume();
    assert!(
        next_delivery(&ev, Duration::from_secs(2)).is_some(),
        "read once resumed"
    );
}

/// What a call made after a pause sees queued is never sent by the paused data path (the
/// hand-over of `anode upgrade` copies those packets to the successor, which sends them):
/// while another thread keeps queueing datagrams, every one reaches the peer exactly once
/// or is among those the post-pause call counted, never both.
#[test]
fn what_a_call_after_the_pause_sees_queued_is_not_sent_by_the_paused_node() {
    let (a, b) = (free_addr(LO), free_addr(LO));
    let ha = std::sync::Arc::new(run(udp_node(a, &[b], true), a));
    let hb = run(udp_node(b, &[a], true), b);
    assert!(wait_route(&ha, b, Duration::from_secs(5)), "route");
    let ev = hb.take_events().expect("events");
    let dst = NodeAddr::from(b);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sender = {
        let (ha, stop) = (ha.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut sent = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && sent < 20_000 {
                let r = ha.call(move |n, now| {
                    (0..64u64)
                        .filter(|i| n.send_datagram(now, dst, 1, sent + i, None, b"q").is_ok())
                        .count() as u64
                });
                sent += r.unwrap_or(0);
            }
            sent
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    ha.pause().expect("paused");
    let queued = ha.call(|n, _| n.pending_transmits()).expect("a call") as u64;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = sender.join().expect("sender");
    let mut got = 0u64;
    while next_delivery(&ev, Duration::from_millis(300)).is_some() {
        got += 1;
    }
    // Datagrams queued by calls after the one that counted are neither counted nor sent.
    assert!(
        got + queued <= sent,
        "sent {sent}, delivered {got}, queued {queued}"
    );
    assert!(sent > 0 && got > 0);
}
