//! Tests of `xtask::machine`.

use xtask::machine::*;

#[test]
fn load_averages_parse_or_are_absent() {
    assert_eq!(
        parse_load_average("0.52 1.10 2.00 3/512 12345\n"),
        Some([0.52, 1.10, 2.00])
    );
    assert_eq!(parse_load_average("0.5 x 1"), None);
    assert_eq!(parse_load_average("0.5 1"), None);
    assert_eq!(parse_load_average(""), None);
    assert_eq!(parse_load_average("-1 0 0"), None);
}
