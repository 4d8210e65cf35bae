//! The CRD committed in the chart is the one the types generate (SPEC 2).

#[test]
fn committed_crds_match_the_types() {
    let crds = [
        ("nodemaintenances.yaml", node_maintenance::api::crd_yaml()),
        ("nodedisruptionbudgets.yaml", node_maintenance::api::budget_crd_yaml()),
    ];
    for (file, generated) in crds {
        let path = format!("{}/charts/node-maintenance/crds/{file}", env!("CARGO_MANIFEST_DIR"));
        let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(
            committed == generated.expect("CRD renders"),
            "the committed {file} drifted from the Rust types: run hack/update-crd.sh"
        );
    }
}

#[test]
fn the_budget_crd_has_the_columns_of_issue_20() {
    let crd: serde_json::Value = serde_saphyr::from_str(&node_maintenance::api::budget_crd_yaml().unwrap()).unwrap();
    assert_eq!(crd["spec"]["scope"], "Cluster");
    let v = &crd["spec"]["versions"][0];
    assert!(v["subresources"]["status"].is_object());
    let columns: Vec<&str> =
        v["additionalPrinterColumns"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(columns, ["Selected", "Unavailable", "Allowed", "Gate", "Window", "Next Window", "Age"]);
    let spec = &v["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["required"], serde_json::json!(["nodeSelector"]));
}

#[test]
fn crd_has_the_api_shape_of_spec_2() {
    let crd: serde_json::Value = serde_saphyr::from_str(&node_maintenance::api::crd_yaml().unwrap()).unwrap();
    assert_eq!(crd["metadata"]["annotations"]["api-approved.kubernetes.io"], "unapproved, experimental-only");
    assert_eq!(crd["spec"]["scope"], "Cluster");
    assert_eq!(crd["spec"]["names"]["shortNames"][0], "nm");
    let v = &crd["spec"]["versions"][0];
    assert_eq!(v["name"], "v1alpha1");
    assert!(v["subresources"]["status"].is_object());
    let columns: Vec<&str> =
        v["additionalPrinterColumns"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(columns, ["Stage", "Drained", "Nodes", "ETA", "Reason", "Age"]);
    // The ETA is the forecast's expected completion (SPEC 4.7).
    assert_eq!(v["additionalPrinterColumns"][3]["jsonPath"], ".status.forecast.completionTime");
    let spec = &v["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert!(spec["properties"]["nodeSelector"]["description"].as_str().unwrap().contains("Selects the nodes"));
    assert_eq!(spec["required"], serde_json::json!(["nodeSelector"]));
}
