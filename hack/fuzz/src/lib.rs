//! What the fuzz targets share: reference models the product's parsers are checked against
//! (Go's `time.ParseDuration`), and the snapshot builder of the `decide` target.

pub mod alerts;
pub mod go;
pub mod input;
pub mod quote;
pub mod window;
pub mod world;
