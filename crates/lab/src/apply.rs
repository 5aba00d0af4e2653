//! The `ip` and `tc` commands that make and remove a lab's network: the batches of
//! [`LabPlan`] run with `ip -batch` / `ip -n NETNS -batch` / `tc -n NETNS -batch` (one process
//! per namespace, not per command, so a 50-node lab is wired in well under a second).
//!
//! Contract: every command is bounded in time ([`LIMIT`]); a failure names the step, the
//! command and its stderr. [`delete_netns`] keeps going past namespaces that are already
//! gone, so it can clean up after any failure.

use std::time::Duration;

use crate::error::LabError;
use crate::plan::LabPlan;
use crate::sys;

/// The bound on one `ip`/`tc` process.
pub const LIMIT: Duration = Duration::from_secs(30);

/// Makes every namespace of the lab.
pub fn create_namespaces(plan: &LabPlan) -> Result<(), LabError> {
    sys::run(
        "ip",
        &["-batch", "-"],
        Some(&plan.netns_batch()),
        "creating the namespaces",
        LIMIT,
    )
    .map(drop)
}

/// True if the kernel has netem: a netem qdisc can be added to `lo` of `netns` (and is
/// removed again).
pub fn netem_available(netns: &str) -> bool {
    let ok = sys::run(
        "tc",
        &[
            "-n", netns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "0ms",
        ],
        None,
        "probing for netem",
        LIMIT,
    )
    .is_ok();
    if ok {
        let _ = sys::run(
            "tc",
            &["-n", netns, "qdisc", "del", "dev", "lo", "root"],
            None,
            "removing the netem probe",
            LIMIT,
        );
    }
    ok
}

/// Makes the veth pairs, addresses, routes and (netem mode) qdiscs.
pub fn wire(plan: &LabPlan) -> Result<(), LabError> {
    let veths = plan.veth_batch();
    if !veths.is_empty() {
        sys::run(
            "ip",
            &["-batch", "-"],
            Some(&veths),
            "creating the veth pairs",
            LIMIT,
        )?;
    }
    for (i, n) in plan.nodes.iter().enumerate() {
        sys::run(
            "ip",
            &["-n", &n.netns, "-batch", "-"],
            Some(&plan.ip_batch(i)),
            &format!("addressing node {} (namespace {})", n.name, n.netns),
            LIMIT,
        )?;
        let tc = plan.tc_batch(i);
        if !tc.is_empty() {
            sys::run(
                "tc",
                &["-n", &n.netns, "-batch", "-"],
                Some(&tc),
                &format!(
                    "adding netem qdiscs of node {} (namespace {})",
                    n.name, n.netns
                ),
                LIMIT,
            )?;
        }
    }
    Ok(())
}

/// Every network namespace's name (`ip netns list`).
pub fn netns_list() -> Result<Vec<String>, LabError> {
    let out = sys::run("ip", &["netns", "list"], None, "listing namespaces", LIMIT)?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// The processes in namespace `netns` (none if it does not exist).
pub fn netns_pids(netns: &str) -> Vec<u32> {
    sys::run(
        "ip",
        &["netns", "pids", netns],
        None,
        "listing a namespace's processes",
        LIMIT,
    )
    .map(|out| out.lines().filter_map(|l| l.trim().parse().ok()).collect())
    .unwrap_or_default()
}

/// Deletes the namespaces in `names` that exist; `Err` lists those still there after.
pub fn delete_netns(names: &[String]) -> Result<(), String> {
    let existing = netns_list().map_err(|e| e.to_string())?;
    let doomed: Vec<&String> = names.iter().filter(|n| existing.contains(n)).collect();
    if !doomed.is_empty() {
        let batch: String = doomed.iter().map(|n| format!("netns del {n}\n")).collect();
        // -force: go on past a namespace that fails; the check below reports what is left.
        let _ = sys::run(
            "ip",
            &["-force", "-batch", "-"],
            Some(&batch),
            "deleting the namespaces",
            LIMIT,
        );
    }
    let after = netns_list().map_err(|e| e.to_string())?;
    let left: Vec<&String> = names.iter().filter(|n| after.contains(n)).collect();
    if left.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "namespaces {}",
            left.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}
