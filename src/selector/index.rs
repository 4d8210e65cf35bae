//! [`NodeIndex`]: the Nodes of a cluster laid out for evaluating node selectors over all of
//! them at once (SPEC 3.4, 3.5: every admission decision selects over every Node).

use super::{NodeMatcher, Requirement};
use k8s_openapi::api::core::v1::Node;
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Node names and labels as columns: one column of interned label values per label key, plus
/// the names. Over a large cluster reading every Node's label map is the cost of a selection
/// (each label is a separately allocated string, a cache miss once the Nodes outgrow the CPU
/// caches); an index reads a few compact columns instead (docs/benchmarks.md, "Node
/// selection"). It keeps names and labels only, not the Nodes, so holding an index keeps no
/// stale Node alive. Build it once per change of the Nodes' names or labels and share it
/// ([`crate::admission::ClusterView::node_index`]).
#[derive(Debug, Default)]
pub struct NodeIndex {
    /// Label key -> column.
    keys: FxHashMap<String, usize>,
    /// Per key, per node: the value's id, or [`ABSENT`].
    columns: Vec<Vec<u32>>,
    /// Per node: the id of its name (`metadata.name`, empty when unset).
    names: Vec<u32>,
    /// Interned label values and names: string -> id.
    ids: FxHashMap<Arc<str>, u32>,
    /// Per id: the string.
    strings: Vec<Arc<str>>,
    /// Per id: the string as an integer, for `Gt`/`Lt`.
    ints: Vec<Option<i64>>,
}

const ABSENT: u32 = u32::MAX;

impl NodeIndex {
    /// Indexes these Nodes; positions `0..len()` follow their order.
    pub fn new<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> Self {
        Self::with_keys(nodes, None)
    }

    /// Indexes the names of these Nodes and, with `Some(keys)`, only the labels of those
    /// keys (`None`: every label): a selection that reads another key sees no node carry
    /// it, so the caller must select through this index only with selectors that read
    /// `keys` alone.
    pub fn with_keys<'a>(nodes: impl IntoIterator<Item = &'a Node>, keys: Option<&[String]>) -> Self {
        let mut index = NodeIndex::default();
        for (i, node) in nodes.into_iter().enumerate() {
            let name = index.intern(node.metadata.name.as_deref().unwrap_or_default());
            index.names.push(name);
            for column in &mut index.columns {
                column.push(ABSENT);
            }
            let labels = node.metadata.labels.as_ref();
            // Every label without `keys`, else those of `keys`: one of the two is empty.
            let every = labels.filter(|_| keys.is_none()).into_iter().flatten();
            let picked = keys.unwrap_or_default().iter().filter_map(|k| Some((k, labels?.get(k)?)));
            for (k, v) in every.chain(picked) {
                let id = index.intern(v);
                let column = match index.keys.get(k) {
                    Some(&c) => c,
                    None => {
                        index.keys.insert(k.clone(), index.columns.len());
                        index.columns.push(vec![ABSENT; i + 1]);
                        index.columns.len() - 1
                    }
                };
                index.columns[column][i] = id;
            }
        }
        index
    }

    fn intern(&mut self, value: &str) -> u32 {
        if let Some(&id) = self.ids.get(value) {
            return id;
        }
        let id = u32::try_from(self.strings.len()).unwrap_or(ABSENT - 1);
        let value: Arc<str> = Arc::from(value);
        self.ids.insert(value.clone(), id);
        self.ints.push(value.parse::<i64>().ok());
        self.strings.push(value);
        id
    }

    /// Number of Nodes indexed.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no Node is indexed.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The name of the Node at `position` (empty when it had none). Panics when `position` is
    /// not below [`NodeIndex::len`].
    pub fn name(&self, position: usize) -> &str {
        &self.strings[self.names[position] as usize]
    }

    /// The value of label `key` on the Node at `position`, `None` when it has no such label.
    pub fn label(&self, position: usize, key: &str) -> Option<&str> {
        let &c = self.keys.get(key)?;
        let id = self.columns[c][position];
        (id != ABSENT).then(|| &*self.strings[id as usize])
    }

    /// Whether the Node at `position` carries label `key` (any value).
    pub fn has_label(&self, position: usize, key: &str) -> bool {
        self.label(position, key).is_some()
    }

    /// Per Node in index order, whether it carries label `key` (any value): [`Self::has_label`]
    /// of every position, with the key looked up once.
    pub fn carrying(&self, key: &str) -> impl Iterator<Item = bool> + '_ {
        let column = self.keys.get(key).map(|&c| self.columns[c].as_slice());
        (0..self.len()).map(move |i| column.is_some_and(|c| c[i] != ABSENT))
    }

    /// Per node, whether requirement `r` holds: what `Requirement::matches` says of it.
    fn eval(&self, r: &Requirement, field: bool, out: &mut [bool]) {
        // The column the requirement reads; `None`: no node has the key.
        let column: Option<&[u32]> = if field {
            (r.key() == "metadata.name").then_some(self.names.as_slice())
        } else {
            self.keys.get(r.key()).map(|&c| self.columns[c].as_slice())
        };
        let ids = |vs: &BTreeSet<String>| -> Vec<u32> {
            vs.iter().filter_map(|v| self.ids.get(v.as_str()).copied()).collect()
        };
        let Some(column) = column else {
            // Every lookup is None.
            let holds = matches!(r, Requirement::NotIn(..) | Requirement::DoesNotExist(_));
            if !holds {
                out.iter_mut().for_each(|o| *o = false);
            }
            return;
        };
        let keep = |pred: &dyn Fn(u32) -> bool, out: &mut [bool]| {
            for (o, &v) in out.iter_mut().zip(column) {
                *o = *o && pred(v);
            }
        };
        match r {
            Requirement::In(_, vs) => {
                let ids = ids(vs);
                keep(&|v| v != ABSENT && ids.contains(&v), out)
            }
            Requirement::NotIn(_, vs) => {
                let ids = ids(vs);
                keep(&|v| v == ABSENT || !ids.contains(&v), out)
            }
            Requirement::Exists(_) => keep(&|v| v != ABSENT, out),
            Requirement::DoesNotExist(_) => keep(&|v| v == ABSENT, out),
            Requirement::Gt(_, n) => keep(&|v| v != ABSENT && self.ints[v as usize].is_some_and(|x| x > *n), out),
            Requirement::Lt(_, n) => keep(&|v| v != ABSENT && self.ints[v as usize].is_some_and(|x| x < *n), out),
        }
    }
}

impl NodeMatcher {
    /// Per node of `index`, whether it is selected: [`NodeMatcher::matches`] of each Node, in
    /// index order.
    pub fn matches_indexed(&self, index: &NodeIndex) -> Vec<bool> {
        let n = index.len();
        let mut any = vec![false; n];
        let mut term = vec![false; n];
        for (exprs, fields) in &self.terms {
            if exprs.is_empty() && fields.is_empty() {
                continue;
            }
            term.iter_mut().for_each(|t| *t = true);
            for r in exprs {
                index.eval(r, false, &mut term);
            }
            for r in fields {
                index.eval(r, true, &mut term);
            }
            for (a, t) in any.iter_mut().zip(&term) {
                *a |= *t;
            }
        }
        any
    }

    /// The names of the Nodes of `index` it selects, in index order.
    pub fn select_indexed<'a>(&self, index: &'a NodeIndex) -> Vec<&'a str> {
        self.matches_indexed(index).iter().enumerate().filter(|(_, m)| **m).map(|(i, _)| index.name(i)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use proptest::prelude::*;

    const KEYS: [&str; 4] = ["pool", "zone", "cpu", "metadata.name"];
    const VALUES: [&str; 6] = ["a", "b", "4", "16", "-3", "n1"];
    const OPS: [&str; 6] = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];

    fn requirement() -> impl Strategy<Value = NodeSelectorRequirement> {
        // Mostly valid: the number of values the operator takes.
        (0..KEYS.len(), 0..OPS.len(), prop::collection::vec(0..VALUES.len(), 1..3)).prop_map(|(k, o, vs)| {
            let n = match OPS[o] {
                "Exists" | "DoesNotExist" => 0,
                "Gt" | "Lt" => 1,
                _ => vs.len(),
            };
            let values: Vec<String> = vs[..n].iter().map(|&v| VALUES[v].to_owned()).collect();
            NodeSelectorRequirement {
                key: KEYS[k].into(),
                operator: OPS[o].into(),
                values: (!values.is_empty()).then_some(values),
            }
        })
    }

    fn node_selector() -> impl Strategy<Value = NodeSelector> {
        let term = (prop::collection::vec(requirement(), 0..3), prop::collection::vec(requirement(), 0..2)).prop_map(
            |(e, f)| NodeSelectorTerm {
                match_expressions: (!e.is_empty()).then_some(e),
                match_fields: (!f.is_empty()).then_some(f),
            },
        );
        prop::collection::vec(term, 0..3).prop_map(|t| NodeSelector { node_selector_terms: t })
    }

    fn nodes() -> impl Strategy<Value = Vec<Node>> {
        let node = (prop::option::of(0..VALUES.len()), prop::collection::btree_map(0..3usize, 0..VALUES.len(), 0..3))
            .prop_map(|(name, labels)| Node {
                metadata: ObjectMeta {
                    name: name.map(|n| VALUES[n].to_string()),
                    labels: Some(labels.into_iter().map(|(k, v)| (KEYS[k].into(), VALUES[v].into())).collect()),
                    ..Default::default()
                },
                ..Default::default()
            });
        prop::collection::vec(node, 0..8)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn indexed_selection_is_node_by_node_selection(sel in node_selector(), nodes in nodes()) {
            let index = NodeIndex::new(&nodes);
            for (i, n) in nodes.iter().enumerate() {
                prop_assert_eq!(index.name(i), n.metadata.name.as_deref().unwrap_or_default());
                for k in KEYS {
                    prop_assert_eq!(index.label(i, k), n.metadata.labels.as_ref().and_then(|l| l.get(k)).map(String::as_str));
                }
            }
            for k in KEYS {
                let want: Vec<bool> = nodes.iter().map(|n| n.metadata.labels.as_ref().is_some_and(|l| l.contains_key(k))).collect();
                prop_assert_eq!(index.carrying(k).collect::<Vec<_>>(), want);
            }
            if let Some(m) = NodeMatcher::compile(&sel) {
                let want: Vec<bool> = nodes.iter().map(|n| m.matches(n)).collect();
                prop_assert_eq!(m.matches_indexed(&index), want);
            }
        }
    }
}
