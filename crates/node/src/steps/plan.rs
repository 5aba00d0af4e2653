//! Emulator step `inject-plan`: builds a PLAN packet at `node` (its source) and injects it
//! there, then after `wait_ms` reports what came back at every node: `print` output,
//! deliveries and errors (an `anode_plan::ee::EvalReport`).
//!
//! Keys: node, file (a PLAN source, relative to the working directory) or program (inline
//! text), entry (`f(args)`; `{name}` stands for node `name`'s address in this run), rb (32),
//! eval_at (node name; default `node`), handler, wait_ms (2000), expect_print (text that some
//! node must print; the check also fails on any error).
//!
//! Contract: the program is compiled and type-checked when the file is parsed, so a bad
//! program is a parse error at its key; the entry's node names are resolved at run time.

use std::time::Duration;

use anode_emu::{Action, Check, Next, ReportCtx, StepArgs, StepCtx, StepOutcome};
use anode_plan::ee::{EvalReport, PacketSpec, PlanEe, build_packet};
use serde_json::json;

/// The `inject-plan` step.
#[derive(Debug)]
struct InjectPlan {
    node: usize,
    label: String,
    text: String,
    entry: String,
    rb: u16,
    eval_at: Option<usize>,
    handler: String,
    wait: Duration,
    expect: Option<String>,
    // Run state.
    cursor: Option<usize>,
    build_error: Option<String>,
    out: Vec<(usize, String, String)>,
}

/// Parses an `inject-plan` step.
pub fn parse(a: &mut StepArgs<'_>) -> Result<Box<dyn Action>, anode_emu::SpanError> {
    let node = a.node("node")?;
    let file = a.str_opt("file")?;
    let program = a.str_opt("program")?;
    let (label, text) = match (file, program) {
        (Some(f), None) => {
            let t = std::fs::read_to_string(&f).map_err(|e| {
                a.err(
                    "file",
                    format!("cannot read {f}: {e}"),
                    "give a path relative to the working directory, or the program inline (program = \"...\")",
                )
            })?;
            (f, t)
        }
        (None, Some(p)) => ("inline program".to_string(), p),
        _ => {
            return Err(a.err(
                "file",
                "give exactly one of file and program",
                "e.g. file = \"crates/plan/programs/ping/noeval.plan\"",
            ));
        }
    };
    let ee = PlanEe::with_defaults();
    if let Err(e) = ee.interp().compile(&text) {
        let key = if label == "inline program" {
            "program"
        } else {
            "file"
        };
        return Err(a.err(
            key,
            format!("{label}: {e}"),
            "fix the program (anode plan check FILE)",
        ));
    }
    let entry = a.str_req("entry", "the entry call, e.g. entry = \"ping({a}, {c})\"")?;
    let eval_at = match a.str_opt("eval_at")? {
        Some(_) => Some(a.node("eval_at")?),
        None => None,
    };
    Ok(Box::new(InjectPlan {
        node,
        label,
        text,
        entry,
        rb: a.u64_in("rb", 1..=65535)?.unwrap_or(32) as u16,
        eval_at,
        handler: a.str_opt("handler")?.unwrap_or_default(),
        wait: a.ms_opt("wait_ms")?.unwrap_or(Duration::from_secs(2)),
        expect: a.str_opt("expect_print")?,
        cursor: None,
        build_error: None,
        out: Vec::new(),
    }))
}

impl InjectPlan {
    /// The entry with `{name}` replaced by node addresses.
    fn entry(&self, ctx: &StepCtx<'_>) -> String {
        let mut e = self.entry.clone();
        for i in 0..ctx.node_count() {
            if let Some(a) = ctx.node_addr(i) {
                e = e.replace(&format!("{{{}}}", ctx.node_name(i)), &a.to_string());
            }
        }
        e
    }
}

impl Action for InjectPlan {
    fn run(&mut self, ctx: &mut StepCtx<'_>) -> Next {
        let Some(from) = self.cursor else {
            self.cursor = Some(ctx.ee_events(0).len());
            let (Some(src), Some(dst)) = (
                ctx.node_addr(self.node),
                ctx.node_addr(self.eval_at.unwrap_or(self.node)),
            ) else {
                return Next::Done;
            };
            let mut spec = PacketSpec::new(src, dst, self.rb);
            spec.handler = self.handler.clone();
            let ee = PlanEe::with_defaults();
            match build_packet(ee.interp(), &self.text, &self.entry(ctx), &spec) {
                Ok(pkt) => ctx.with_node(
                    self.node,
                    Box::new(move |n, now| {
                        if let Err(e) = n.inject(now, pkt) {
                            tracing::warn!("inject-plan: the node refused the packet: {e}");
                        }
                    }),
                ),
                Err(e) => {
                    self.build_error = Some(e.to_string());
                    return Next::Done;
                }
            }
            return Next::After(self.wait);
        };
        let mut rep = EvalReport::default();
        for e in ctx.ee_events(from) {
            let addr = ctx
                .node_addr(e.node)
                .unwrap_or(anode_wire::NodeAddr::UNSPECIFIED);
            let before = (rep.prints.len(), rep.deliveries.len(), rep.errors.len());
            if !rep.add_event(addr, &e.event) {
                continue;
            }
            let name = ctx.node_name(e.node).to_string();
            if rep.prints.len() > before.0
                && let Some((_, t)) = rep.prints.last()
            {
                self.out
                    .push((e.node, "print".into(), format!("{name}: {t}")));
            } else if rep.deliveries.len() > before.1
                && let Some((_, d)) = rep.deliveries.last()
            {
                self.out.push((
                    e.node,
                    "deliver".into(),
                    format!("{name}: port {} <- {}", d.port, d.value),
                ));
            } else if let Some((_, m)) = rep.errors.last() {
                self.out
                    .push((e.node, "error".into(), format!("{name}: {m}")));
            }
        }
        Next::Done
    }

    fn report(&self, ctx: &ReportCtx<'_>) -> StepOutcome {
        let of = |k: &str| -> Vec<String> {
            self.out
                .iter()
                .filter(|(_, kind, _)| kind == k)
                .map(|(_, _, t)| t.clone())
                .collect()
        };
        let (prints, delivs, mut errors) = (of("print"), of("deliver"), of("error"));
        if let Some(e) = &self.build_error {
            errors.push(format!("packet not built: {e}"));
        }
        let summary = format!(
            "inject-plan {} at {}: {} ({} print, {} deliveries, {} errors)",
            self.label,
            ctx.node_name(self.node),
            self.entry,
            prints.len(),
            delivs.len(),
            errors.len()
        );
        let details = self
            .out
            .iter()
            .map(|(_, k, t)| format!("{k:<7} {t}"))
            .chain(self.build_error.iter().map(|e| format!("error   {e}")))
            .collect();
        let check = self.expect.as_ref().map(|want| {
            let found = self
                .out
                .iter()
                .any(|(_, k, t)| k == "print" && t.split_once(": ").is_some_and(|(_, x)| x == want));
            Check {
                passed: found && errors.is_empty(),
                message: format!(
                    "expected a print of {want:?} and no errors; got prints {prints:?}, errors {errors:?}"
                ),
            }
        });
        StepOutcome {
            summary,
            details,
            check,
            data: json!({
                "prints": prints, "deliveries": delivs, "errors": errors,
                "expect": self.expect.as_ref().map(|w| format!("a print of {w:?}, no errors")),
            }),
        }
    }
}
