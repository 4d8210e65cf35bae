//! Standalone mode's view of the cluster (SPEC 5): Nodes, and optionally NodeMaintenances and
//! NodeDisruptionBudgets, read once from a `kubectl get nodes -o yaml` style file instead of a
//! watch.

use crate::admission::ClusterView;
use crate::api::{NodeDisruptionBudget, NodeMaintenance};
use crate::selector::NodeIndex;
use k8s_openapi::api::core::v1::Node;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Errors reading a standalone cluster file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not YAML/JSON.
    #[error("{path}: not YAML or JSON: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// An item is not a valid Node or NodeMaintenance.
    #[error("{path}: item {index} ({kind} {name:?}): {message}")]
    Item {
        /// The file.
        path: PathBuf,
        /// Position of the item in the file.
        index: usize,
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
        /// What was wrong.
        message: String,
    },
}

/// A fixed set of Nodes, NodeMaintenances and NodeDisruptionBudgets.
#[derive(Clone, Debug, Default)]
pub struct StaticView {
    /// The Nodes.
    pub nodes: Vec<Arc<Node>>,
    /// The NodeMaintenances.
    pub maintenances: Vec<Arc<NodeMaintenance>>,
    /// The NodeDisruptionBudgets.
    pub budgets: Vec<Arc<NodeDisruptionBudget>>,
    /// The selector index over `nodes`, built on first use (the Nodes never change).
    index: std::sync::OnceLock<Arc<NodeIndex>>,
}

impl ClusterView for StaticView {
    fn maintenances(&self) -> Vec<Arc<NodeMaintenance>> {
        self.maintenances.clone()
    }

    fn budgets(&self) -> Vec<Arc<NodeDisruptionBudget>> {
        self.budgets.clone()
    }

    fn nodes(&self) -> Vec<Arc<Node>> {
        self.nodes.clone()
    }

    fn node_index(&self) -> Arc<NodeIndex> {
        self.index.get_or_init(|| Arc::new(NodeIndex::new(self.nodes.iter().map(AsRef::as_ref)))).clone()
    }
}

impl StaticView {
    /// A view of these objects.
    pub fn new(nodes: Vec<Arc<Node>>, maintenances: Vec<Arc<NodeMaintenance>>) -> Self {
        StaticView { nodes, maintenances, budgets: Vec::new(), index: Default::default() }
    }

    /// Reads Nodes, NodeMaintenances and NodeDisruptionBudgets from a YAML or JSON file: a
    /// `List` (what `kubectl get nodes,nodemaintenances,ndb -o yaml` prints), single objects,
    /// or several YAML documents. Items of other kinds are skipped; managedFields are dropped.
    ///
    /// # Errors
    /// [`LoadError`] when the file is unreadable, not YAML/JSON, or holds a malformed Node,
    /// NodeMaintenance or NodeDisruptionBudget.
    pub fn load(path: &Path) -> Result<Self, LoadError> {
        let mut view = StaticView::default();
        for_each_item(path, |item| {
            match item.kind.as_str() {
                "Node" => view.nodes.push(Arc::new(item.decode()?)),
                "NodeMaintenance" => view.maintenances.push(Arc::new(item.decode()?)),
                "NodeDisruptionBudget" => view.budgets.push(Arc::new(item.decode()?)),
                other => tracing::debug!(
                    kind = other,
                    name = item.name,
                    "skipping item that is not a Node, NodeMaintenance or NodeDisruptionBudget"
                ),
            }
            Ok(())
        })?;
        Ok(view)
    }
}

/// One object of a cluster file, as [`for_each_item`] hands it over.
pub struct Item<'a> {
    /// The file.
    path: &'a Path,
    /// Position of the item in the file.
    index: usize,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// The object, without `metadata.managedFields`.
    pub value: Value,
}

impl Item<'_> {
    /// Decodes the item as a `T`.
    ///
    /// # Errors
    /// [`LoadError::Item`] naming the file, position, kind and name when it is not a valid `T`.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Result<T, LoadError> {
        serde_json::from_value(self.value.clone()).map_err(|e| LoadError::Item {
            path: self.path.into(),
            index: self.index,
            kind: self.kind.clone(),
            name: self.name.clone(),
            message: e.to_string(),
        })
    }
}

/// Reads a YAML or JSON cluster file (a `List` as `kubectl get ... -o yaml` prints it, single
/// objects, or several YAML documents) and calls `each` on every object, in file order.
///
/// # Errors
/// [`LoadError`] when the file is unreadable or not YAML/JSON, or the first error `each`
/// returns.
pub fn for_each_item(path: &Path, mut each: impl FnMut(Item<'_>) -> Result<(), LoadError>) -> Result<(), LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read { path: path.into(), source })?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .map_err(|e| LoadError::Parse { path: path.into(), message: e.to_string() })?;
    let items = docs.into_iter().flat_map(|d| match d.get("items").and_then(Value::as_array) {
        Some(items) => items.clone(),
        None => vec![d],
    });
    for (index, mut value) in items.enumerate() {
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        let kind = value.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
        let name = value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
        each(Item { path, index, kind, name, value })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_a_kubectl_list_and_multi_document_yaml() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.yaml");
        std::fs::write(
            &p,
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: a, managedFields: [{manager: x}]}\n\
             ---\napiVersion: nodemaintenance.k8s.io/v1alpha1\nkind: NodeMaintenance\nmetadata: {name: m}\n\
             spec: {nodeSelector: {nodeSelectorTerms: []}, stage: Cordon}\n---\nkind: Pod\nmetadata: {name: p}\n",
        )
        .unwrap();
        let v = StaticView::load(&p).unwrap();
        assert_eq!(v.nodes.len(), 1);
        assert!(v.nodes[0].metadata.managed_fields.is_none());
        assert_eq!(v.maintenances.len(), 1);
    }

    #[test]
    fn reports_the_bad_item() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.yaml");
        std::fs::write(&p, "kind: NodeMaintenance\nmetadata: {name: m}\nspec: {stage: Sideways}\n").unwrap();
        let e = StaticView::load(&p).unwrap_err().to_string();
        assert!(e.contains("item 0 (NodeMaintenance \"m\")"), "{e}");
        assert!(StaticView::load(Path::new("/nonexistent")).is_err());
    }
}
