//! Without root the namespace tests fail, with a message that says to run them as root; they
//! never pass silently. Checked by re-running this test binary as `nobody` (util-linux
//! `setpriv`).

use std::process::Command;

use rtdaq_testbed::{is_root, Side, TestbedError, VethPair};

const CHILD: &str = "RTDAQ_TESTBED_NOT_ROOT_CHILD";

/// The child half: as `nobody`, the usual `build().unwrap_or_else(|e| panic!("{e}"))` of a
/// test must panic with the NotRoot text.
fn child() {
    assert!(!is_root());
    assert!(matches!(VethPair::new("nr"), Err(TestbedError::NotRoot)));
    let p = VethPair::new("nr").unwrap_or_else(|e| panic!("{e}"));
    println!("unreachable: {}", p.ns(Side::A));
}

#[test]
fn without_root_the_tests_fail_with_the_clear_message() {
    if std::env::var_os(CHILD).is_some() {
        return child();
    }
    assert!(is_root(), "{}", TestbedError::NotRoot);
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(&exe)
        .args([
            "--exact",
            "without_root_the_tests_fail_with_the_clear_message",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .expect("setpriv (util-linux) is needed to drop privileges");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success(),
        "the unprivileged run passed:\n{text}"
    );
    assert!(text.contains("run the namespace tests as root"), "{text}");
    assert!(text.contains("1 failed"), "{text}");
}
