//! The drain plans shared by the planner and controller benches: the 12 defaults plus, for
//! three maintenances in four, user entries with and without podSelectors.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use node_maintenance::api::{DrainPlanEntry, PodType, default_plan};
use std::collections::BTreeMap;

/// `matchLabels: {k: v}`.
pub fn selector(k: &str, v: &str) -> Option<LabelSelector> {
    Some(LabelSelector { match_labels: Some(BTreeMap::from([(k.to_owned(), v.to_owned())])), ..Default::default() })
}

/// The defaulted plan of maintenance `i`.
pub fn user_plan(i: usize) -> Vec<DrainPlanEntry> {
    let e = DrainPlanEntry::new;
    let user = match i % 4 {
        0 => vec![],
        1 => vec![e(PodType::Default, 1000), e(PodType::Default, 5000)],
        2 => vec![
            DrainPlanEntry { pod_selector: selector("app", "postgres"), ..e(PodType::Default, 1000) },
            e(PodType::Default, 5000),
        ],
        _ => vec![
            DrainPlanEntry { pod_selector: selector("tier", "cache"), ..e(PodType::Default, 5000) },
            e(PodType::Default, 1000),
            DrainPlanEntry { pod_selector: selector("app", "logging"), ..e(PodType::DaemonSet, 1_000_000_000) },
        ],
    };
    default_plan(&user)
}
