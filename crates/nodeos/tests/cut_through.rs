//! cutChan end to end: an EE moves a data flow onto the fast path with a cut-through channel
//! (node core + `CutTable`); the flow's packets stop reaching the EE but still arrive, while
//! the EE's control capsules keep coming to it. A bandwidth limit polices the channel.

mod common;

use std::time::Duration;

use anode_core::wire::anep::TYPE_CAPSULE;
use anode_core::{CutSpec, DropReason, EePacket, ExecutionEnvironment, NodeContext};
use anode_nodeos::{CutTable, flow_key};
use common::*;

const CONTROL: u8 = 9;

/// Forwards everything it sees; a CONTROL capsule asks it to cut through the flow named in
/// its payload (8 bytes) at `rate` bytes/s.
#[derive(Debug, Default)]
struct FlowEe {
    seen: Vec<(u8, u64)>,
    rate: Option<u64>,
}

impl ExecutionEnvironment for FlowEe {
    fn type_id(&self) -> u16 {
        TYPE_CAPSULE
    }
    fn name(&self) -> &str {
        "flow"
    }
    fn handle_packet(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket) {
        let kind = pkt.ee_bytes().first().copied().unwrap_or(0);
        let flow = pkt.transit().flow();
        self.seen.push((kind, flow));
        if kind == CONTROL {
            let mut f = [0u8; 8];
            if let Some(b) = pkt.ee_bytes().get(2..10) {
                f.copy_from_slice(b);
            }
            let spec = CutSpec {
                via: None,
                rate_bytes_per_sec: self.rate,
                burst_bytes: 0,
                expires: None,
                owner: "test".into(),
            };
            ctx.open_cut_through(TYPE_CAPSULE, vec![flow_key(u64::from_be_bytes(f))], spec)
                .unwrap();
        }
        let _ = ctx.forward(pkt.buf, pkt.anep_len);
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

fn control_capsule(data_flow: u64) -> Vec<u8> {
    let mut p = capsule(0, 2, CONTROL, 0, 99);
    // EE bytes start after 8 (ANEP) + 72 (transit): [kind, proto, flow...]
    p[82..90].copy_from_slice(&data_flow.to_be_bytes());
    p
}

fn setup(rate: Option<u64>) -> Line {
    let mut line = Line::new(3);
    line.nodes[0].register_ee(Box::new(Sink::default()));
    line.nodes[1].register_ee(Box::new(FlowEe {
        rate,
        ..Default::default()
    }));
    line.nodes[1].set_cut_through(Box::new(CutTable::new(16, u64::MAX)));
    line.nodes[2].register_ee(Box::new(Sink::default()));
    line.advance(Duration::from_secs(5));
    line
}

fn flow_ee(line: &mut Line) -> &mut FlowEe {
    line.nodes[1]
        .ee_mut(TYPE_CAPSULE)
        .unwrap()
        .as_any_mut()
        .downcast_mut::<FlowEe>()
        .unwrap()
}

fn delivered(line: &mut Line) -> u64 {
    line.nodes[2]
        .ee_mut(TYPE_CAPSULE)
        .unwrap()
        .as_any_mut()
        .downcast_mut::<Sink>()
        .unwrap()
        .got
        .get(&BENIGN)
        .copied()
        .unwrap_or(0)
}

#[test]
fn a_flow_moved_to_a_cut_through_channel_bypasses_the_ee_but_control_still_reaches_it() {
    let mut line = setup(None);
    let data = |seq| capsule(0, 2, BENIGN, 5, seq);
    let data_flow = 5u64 << 56 | 1;
    let now = line.now;
    line.nodes[0].inject(now, data(1)).unwrap();
    line.pump();
    assert_eq!(flow_ee(&mut line).seen, vec![(BENIGN, data_flow)]);
    // The EE moves flow (5<<56|1) onto the fast path.
    line.nodes[0]
        .inject(now, control_capsule(data_flow))
        .unwrap();
    line.pump();
    for _ in 0..100 {
        line.nodes[0].inject(now, data(1)).unwrap();
    }
    // Another flow of the same protocol still goes to the EE.
    line.nodes[0].inject(now, data(2)).unwrap();
    line.nodes[0].inject(now, control_capsule(12345)).unwrap();
    line.pump();
    let seen = flow_ee(&mut line).seen.clone();
    assert_eq!(
        seen,
        vec![
            (BENIGN, data_flow),
            (CONTROL, 99),
            (BENIGN, 5u64 << 56 | 2),
            (CONTROL, 99)
        ]
    );
    assert_eq!(line.nodes[1].counters().cut_through, 100);
    assert_eq!(delivered(&mut line), 102);
}

#[test]
fn a_cut_through_channel_is_policed_by_its_bandwidth() {
    // 150-byte capsules at 10 kB/s with a 64 KiB burst: over 1 s at 10,000 capsules/s the
    // channel passes burst + rate, and drops (counts) the rest.
    let mut line = setup(Some(10_000));
    let data_flow = 5u64 << 56 | 1;
    let now = line.now;
    line.nodes[0]
        .inject(now, control_capsule(data_flow))
        .unwrap();
    line.pump();
    let len = capsule(0, 2, BENIGN, 5, 1).len() as u64;
    for _ in 0..10_000 {
        let now = line.now;
        line.nodes[0]
            .inject(now, capsule(0, 2, BENIGN, 5, 1))
            .unwrap();
        line.advance(Duration::from_micros(100));
    }
    let passed = line.nodes[1].counters().cut_through;
    let policed = line.nodes[1]
        .counters()
        .drops(DropReason::CutThroughPoliced);
    assert_eq!(passed + policed, 10_000);
    let max = (65_536 + 10_000 * 2) / len; // burst + rate over ~1 s, with slack for timers
    assert!(
        passed <= max && passed >= (65_536 + 10_000 / 2) / len,
        "{passed} (max {max})"
    );
}
