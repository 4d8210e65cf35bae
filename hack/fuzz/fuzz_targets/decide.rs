//! The controller's decision (`planner::decide::scopes` and `decide`, with the planning pass
//! `planner::plan` built from the same objects) over arbitrary small clusters, structure-aware
//! (`arbitrary` mirror structs written as the API's JSON): never panics, and holds and
//! evictions keep to the counts, pauses, gates and holders (`node_maintenance_fuzz::world`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use node_maintenance_fuzz::world::World;

fuzz_target!(|world: World| world.check());
