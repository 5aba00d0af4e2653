//! PLANet §V-A (Fig. 6/7) in the emulator: FCFS at the saturated router lets the misbehaving
//! source take most of it; a round-robin queue module installed while traffic runs gives S
//! its 15 Mbps back; FCFS reinstalled later.

use anode_modules::planet;

#[test]
fn round_robin_installed_at_run_time_restores_the_well_behaved_share() {
    let src = include_str!("../../../topologies/planet-qdisc.toml");
    let r = planet::run(src, "planet-qdisc.toml").unwrap();
    assert!(r.passed, "every install step succeeded");
    let s_alone = planet::mean(&r.s, 3.0, 6.0);
    let (s_fcfs, ms_fcfs) = (
        planet::mean(&r.s, 7.0, 12.0),
        planet::mean(&r.ms, 7.0, 12.0),
    );
    let (s_rr, ms_rr) = (
        planet::mean(&r.s, 13.0, 22.0),
        planet::mean(&r.ms, 13.0, 22.0),
    );
    let ms_end = planet::mean(&r.ms, 26.0, 30.0);
    eprintln!(
        "S alone {s_alone:.1}; FCFS S {s_fcfs:.1} MS {ms_fcfs:.1}; RR S {s_rr:.1} MS {ms_rr:.1}; FCFS again MS {ms_end:.1} (Mbps)"
    );
    assert!((14.0..=16.0).contains(&s_alone));
    // FCFS: shares follow arrival rates, MS takes most of R1 and S loses a quarter or more.
    assert!(
        s_fcfs < 12.0 && ms_fcfs > 2.0 * s_fcfs,
        "{s_fcfs} {ms_fcfs}"
    );
    // Round robin: S gets its 15 Mbps back, MS the rest.
    assert!(s_rr > 14.0, "{s_rr}");
    assert!(ms_rr < ms_fcfs && ms_rr > 18.0, "{ms_rr}");
    // FCFS again, S gone: MS gets the whole switching capacity (payload ~37 of 40 Mbps).
    assert!(ms_end > 34.0, "{ms_end}");
}
