//! Service packages on node cores (virtual time): reliable delivery under loss, chunk
//! authentication with a configured key, resident data across packets.

mod node_common;

use std::time::Duration;

use anode_plan::ee::{PacketSpec, compact_source};
use anode_plan::{Interpreter, marshal};
use anode_testkit::fixtures::{addr, signing_key};
use anode_wire::anep::TYPE_PLAN;
use ed25519_dalek::Signer;
use node_common::Net;

/// Whether `buf` is a PLAN packet whose bytes contain `needle` (a function name).
fn plan_with(buf: &[u8], needle: &[u8]) -> bool {
    buf.get(2..4) == Some(&TYPE_PLAN.to_be_bytes()[..])
        && buf.windows(needle.len()).any(|w| w == needle)
}

const RETRANS: &str = "fun there() = print(\"delivered once\")\n\
     fun test(h : host) = RetransOnRemote(|there|(), h, 10, defaultRoute, 3, 500)";

#[test]
fn retrans_on_remote_is_retransmitted_until_acknowledged_and_runs_once() {
    let mut net = Net::line(3);
    // The first transmission is lost on the first wire, and so is the first acknowledgement.
    let mut lost = (0, 0);
    net.tap = Some(Box::new(move |from, to, buf: &mut Vec<u8>| {
        if from == 0 && to == 1 && plan_with(buf, b"retransDeliver") && lost.0 == 0 {
            lost.0 += 1;
            return false;
        }
        if from == 1 && to == 0 && plan_with(buf, b"retransAck") && lost.1 == 0 {
            lost.1 += 1;
            return false;
        }
        true
    }));
    let entry = format!("test({})", addr(2));
    net.inject(0, RETRANS, &entry, &PacketSpec::new(addr(0), addr(0), 20));
    assert_eq!(net.output(2), "", "the first copy was lost");
    assert_eq!(net.ee(0).state().reliable.waiting(), 1);
    net.run_for(Duration::from_secs(3));
    // Sent three times: lost, evaluated (acknowledgement lost), duplicate (acknowledged).
    assert_eq!(net.output(2), "delivered once");
    assert_eq!(net.ee(0).stats().retransmissions, 2);
    assert_eq!(net.ee(0).state().reliable.waiting(), 0);
    assert!(
        net.report.iter().all(|r| r.errors.is_empty()),
        "{:?}",
        net.report
    );
}

#[test]
fn retrans_on_remote_gives_up_after_its_retries() {
    let mut net = Net::line(3);
    net.tap = Some(Box::new(|from, to, buf: &mut Vec<u8>| {
        !(from == 0 && to == 1 && plan_with(buf, b"retransDeliver"))
    }));
    let entry = format!("test({})", addr(2));
    net.inject(0, RETRANS, &entry, &PacketSpec::new(addr(0), addr(0), 20));
    net.run_for(Duration::from_secs(5));
    assert_eq!(net.output(2), "");
    assert_eq!(net.ee(0).stats().retransmissions, 3);
    assert_eq!(
        net.ee(0)
            .stats()
            .dropped(anode_core::DropReason::RetransUnacked),
        1
    );
    let errors = &net.report[0].errors;
    assert!(
        errors
            .iter()
            .any(|(_, e)| e.contains("no acknowledgement after 4 transmissions")),
        "{errors:?}"
    );
}

const AUTH: &str = "fun secret() = print(\"ran signed code\")\n\
     fun test(k : string, sig : string) = authEval(|secret|(), keyFromHex(k), blobFromHex(sig))";

#[test]
fn auth_eval_runs_chunks_signed_by_a_trusted_key_only() {
    let key = signing_key(7);
    let public = key.verifying_key().to_bytes();
    // The chunk the program builds carries the program as it travels (compacted).
    let travelling = compact_source(AUTH);
    let prog = Interpreter::with_core().compile(&travelling).unwrap();
    let signed = marshal::encode_chunk(&prog.chunk("secret", vec![]).unwrap());
    let sig = key.sign(&signed).to_bytes();
    let entry = |sig: &[u8]| {
        format!(
            "test(\"{}\", \"{}\")",
            hex::encode(public),
            hex::encode(sig)
        )
    };

    let mut net = Net::line(2);
    net.inject(0, AUTH, &entry(&sig), &PacketSpec::new(addr(0), addr(1), 8));
    assert_eq!(net.output(1), "");
    assert!(
        net.report[1].errors[0]
            .1
            .contains("AuthFailed: authEval: this node trusts no PLAN keys"),
        "{:?}",
        net.report[1].errors
    );

    net.clear_reports();
    net.ee(1).set_trusted_keys(vec![public]);
    net.inject(0, AUTH, &entry(&sig), &PacketSpec::new(addr(0), addr(1), 8));
    assert_eq!(net.output(1), "ran signed code");

    net.clear_reports();
    let mut forged = sig;
    forged[0] ^= 1;
    net.inject(
        0,
        AUTH,
        &entry(&forged),
        &PacketSpec::new(addr(0), addr(1), 8),
    );
    assert_eq!(net.output(1), "");
    assert!(
        net.report[1].errors[0]
            .1
            .contains("the signature does not match"),
        "{:?}",
        net.report[1].errors
    );
}

#[test]
fn resident_data_outlives_the_packet_that_left_it() {
    let text = "fun leave(k : key) = put(\"count\", k, 41, 60)\n\
         fun read(k : key) = print(get(\"count\", k) + 1)\n\
         fun start(h : host) = let val k = generateKey() in\n\
           (OnRemote(|leave|(k), h, 4, defaultRoute); OnRemote(|read|(k), h, 4, defaultRoute)) end";
    let mut net = Net::line(2);
    let entry = format!("start({})", addr(1));
    net.inject(0, text, &entry, &PacketSpec::new(addr(0), addr(0), 20));
    assert_eq!(net.output(1), "42");
    assert_eq!(net.ee(1).state().resident.len(), 1);
}
