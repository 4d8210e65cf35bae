fn main() {
    print!("{}", node_maintenance::api::crd_yaml().unwrap());
}
