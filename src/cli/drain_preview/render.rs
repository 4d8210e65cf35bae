//! The preview as text for a terminal: counts first, pod names with `--verbose`.

use super::*;

fn plural(n: usize, word: &str) -> String {
    if n == 1 { format!("{n} {word}") } else { format!("{n} {word}s") }
}

pub(super) fn owner_label(o: &Owner) -> String {
    if o.kind == "Pod" { format!("bare pod {}", o.name) } else { format!("{}/{}", o.kind, o.name) }
}

fn priorities(p: &[i32]) -> String {
    let p: Vec<String> = p.iter().map(i32::to_string).collect();
    format!("priority {}", p.join(", "))
}

/// Renders a preview for a terminal: counts first; `verbose` also lists the pods.
pub fn render_text(p: &DrainPreview, verbose: bool) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let mut with = String::new();
    if let Some(n) = p.nodes_at_once {
        let _ = write!(with, ", {} at a time (spec.maxUnavailable)", plural(n, "node"));
    }
    if !p.planned_with.is_empty() {
        let _ = write!(with, ", planned with {}", p.planned_with.join(", "));
    }
    let _ = writeln!(out, "Drain preview ({} on {}{with}):", plural(p.pods, "pod"), plural(p.nodes.len(), "node"));
    let list = |pods: &[String]| if verbose { format!(": {}", pods.join(", ")) } else { String::new() };
    for s in &p.steps {
        let e = &s.plan_entry;
        let selector = e
            .pod_selector
            .as_ref()
            .map(|s| format!(" podSelector {}", serde_json::to_string(s).unwrap_or_default()))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  step {} ({} podPriority <= {}{selector}): evicts {}; {}",
            s.entry,
            e.pod_type.as_str(),
            e.pod_priority,
            plural(s.evicted, "pod"),
            s.message
        );
        for g in &s.by_owner {
            let _ = writeln!(
                out,
                "    {} {}: {} ({}){}",
                g.namespace,
                owner_label(&g.owner),
                g.count,
                priorities(&g.priorities),
                list(&g.pods)
            );
        }
        for w in &s.pdb_waits {
            let _ = writeln!(
                out,
                "    waits: PodDisruptionBudget {} ({} allowed now) refuses {}{}",
                w.pdb,
                w.disruptions_allowed,
                plural(w.pods.len(), "eviction"),
                list(&w.pods)
            );
        }
        for b in &s.blocked {
            let _ = writeln!(out, "    blocked: {}: {}{}", b.label, b.pods.len(), list(&b.pods));
        }
    }
    let end = match (&p.outcome.stuck_at, &p.outcome.reason) {
        _ if p.outcome.drained => "drained".to_owned(),
        (Some(at), Some(r)) => format!("STUCK at step {at}: {r}"),
        (_, r) => format!("STUCK: {}", r.as_deref().unwrap_or("no progress")),
    };
    let _ = writeln!(out, "  Result: {end}");
    for d in &p.rolled_instead {
        let (ns, name, why) = (&d.namespace, &d.name, &d.why);
        let _ = writeln!(
            out,
            "  Rolled instead of evicted: Deployment {ns}/{name} ({why}): {}{}",
            plural(d.pods.len(), "pod"),
            list(&d.pods)
        );
    }
    for n in &p.not_rolled {
        let _ = writeln!(out, "  Not evacuated by rollout: {n}");
    }
    for r in &p.remaining {
        let _ = writeln!(out, "  Remaining: {}: {}{}", r.label, r.pods.len(), list(&r.pods));
    }
    if !p.held_back_by.is_empty() {
        let _ = writeln!(out, "  Held back by: {}", p.held_back_by.join(", "));
    }
    for (label, l) in
        [("Will not come back (no controller)", &p.not_coming_back), ("emptyDir data lost", &p.empty_dir_lost)]
    {
        if l.count > 0 {
            let _ = writeln!(out, "  {label}: {}{}", plural(l.count, "pod"), list(&l.pods));
        }
    }
    for w in &p.warnings {
        let _ = writeln!(out, "  warning: {w}");
    }
    out
}
