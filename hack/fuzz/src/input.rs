//! The byte layout of the targets whose input is mostly text, so that seeds are the text as
//! written in the tests: `KNOBS` bytes of small choices (read with `arbitrary`, zero when the
//! input is shorter), then texts separated by `0xFF`, a byte UTF-8 never contains.

/// How many leading bytes are choices.
pub const KNOBS: usize = 16;

/// The choices and the texts of `data` (parts that are not UTF-8 are left out).
pub fn split(data: &[u8]) -> ([u8; KNOBS], Vec<&str>) {
    let mut knobs = [0u8; KNOBS];
    let n = data.len().min(KNOBS);
    knobs[..n].copy_from_slice(&data[..n]);
    let texts = data[n..].split(|b| *b == 0xFF).filter_map(|t| std::str::from_utf8(t).ok()).collect();
    (knobs, texts)
}

/// The input of a target that reads either a structured value or text: after an odd first
/// byte the rest is a `T` read with `arbitrary` (`None` when it cannot be), otherwise `raw`
/// reads the whole of `data` (the text layout of [`split`]).
pub fn structured_or<'a, T: arbitrary::Arbitrary<'a>>(data: &'a [u8], raw: impl FnOnce(&'a [u8]) -> T) -> Option<T> {
    match data.first() {
        Some(b) if b & 1 == 1 => T::arbitrary_take_rest(arbitrary::Unstructured::new(&data[1..])).ok(),
        _ => Some(raw(data)),
    }
}
