//! The core decides and draws nothing: it reads no clock, draws no random number and does no
//! I/O; the executor hands it the time and every new id. Its sources are checked for the calls
//! that would.

#[test]
fn the_core_reads_no_clock_draws_no_randomness_and_does_no_io() {
    let core = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let forbidden = [
        "::generate(",
        "now_v7",
        "Timestamp::now",
        "SystemTime",
        "Instant::now",
        "rand::",
        "getrandom",
        "tokio::",
        "std::fs",
        "std::net",
        ".await",
    ];
    let mut read = 0;
    for entry in std::fs::read_dir(&core).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for call in forbidden {
            assert!(
                !text.contains(call),
                "{} calls {call}: hand the core what it needs instead",
                path.display()
            );
        }
        read += 1;
    }
    assert!(
        read >= 5,
        "the core's sources were found: {read} files in {}",
        core.display()
    );
}
