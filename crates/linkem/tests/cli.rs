//! The command-line contract: bad input exits 2 with one line naming the field.

use std::process::Command;

fn linkem(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_linkem")).args(args).output().expect("run linkem");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn config_file(name: &str, body: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("fl-lktest-cli-{}-{name}.json", std::process::id()));
    std::fs::write(&p, body).unwrap();
    p
}

const GOOD: &str = r#"{"run_id": "fl-ab12",
 "sender_ports": [{"iface": "fl-nonexist-a0", "one_way_delay_ns": 25000000}],
 "receiver_port": {"iface": "fl-nonexist-b"},
 "rate_bps": 100000000, "reverse_rate_bps": null,
 "buffer": {"bytes": 1250000},
 "qdisc": "droptail", "params": {},
 "seed": 1, "sample_interval_ns": 1000000000,
 "mean_packet_bytes": 1500, "reference_rtt_ns": 100000000}"#;

fn check_rejected(name: &str, body: &str, field: &str) {
    let p = config_file(name, body);
    let (code, err) = linkem(&["--config", p.to_str().unwrap()]);
    std::fs::remove_file(&p).ok();
    assert_eq!(code, 2, "{name}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{name}: error must be one line: {err}");
    assert!(err.contains(&format!("`{field}`")), "{name}: error should name `{field}`: {err}");
    assert!(err.contains("allowed"), "{name}: error should say what is allowed: {err}");
    assert!(err.contains(p.to_str().unwrap()), "{name}: error should name the file: {err}");
}

#[test]
fn bad_configs_exit_2_naming_the_field() {
    check_rejected("unknown", &GOOD.replace("\"seed\"", "\"sede\""), "sede");
    check_rejected("rate", &GOOD.replace("100000000, \"reverse", "\"fast\", \"reverse"), "rate_bps");
    check_rejected("qdisc", &GOOD.replace("\"droptail\"", "\"wfq\""), "qdisc");
    check_rejected("param", &GOOD.replace("\"params\": {}", "\"params\": {\"bogus\": 1}"), "params.bogus");
    check_rejected(
        "red",
        &GOOD.replace("\"droptail\", \"params\": {}", "\"red\", \"params\": {\"max_p\": 7}"),
        "params.max_p",
    );
    check_rejected("buffer", &GOOD.replace("{\"bytes\": 1250000}", "{\"bits\": 1}"), "buffer.bits");
    check_rejected("json", "{not json", "(file)");
}

#[test]
fn bad_command_lines_exit_2() {
    assert_eq!(linkem(&[]).0, 2);
    assert_eq!(linkem(&["--config"]).0, 2);
    assert_eq!(linkem(&["--frobnicate", "x"]).0, 2);
    assert_eq!(linkem(&["--config", "/nonexistent/fl-lktest.json"]).0, 2);
    assert_eq!(linkem(&["--help"]).0, 0);
}

#[test]
fn non_utf8_arguments_are_errors_not_panics() {
    // Before: std::env::args() panicked with a backtrace (exit 101) on any such argument.
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let bad = OsStr::from_bytes(b"/nonexistent/fl-lktest-\xff.json");
    for args in [vec![OsStr::new("--config"), bad], vec![bad]] {
        let out = Command::new(env!("CARGO_BIN_EXE_linkem")).args(&args).output().expect("run linkem");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: error must be one line: {err}");
    }
}

#[test]
fn a_missing_interface_is_a_runtime_error_naming_it() {
    let p = config_file("noif", GOOD);
    let (code, err) = linkem(&["--config", p.to_str().unwrap()]);
    std::fs::remove_file(&p).ok();
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("fl-nonexist-a0"), "{err}");
}
