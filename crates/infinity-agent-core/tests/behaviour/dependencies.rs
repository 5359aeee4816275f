//! The core stays free of AWS SDKs and HTTP clients (adapters depend on it, never the reverse).

const FORBIDDEN: &[&str] = &[
    "aws-", "reqwest", "hyper", "ureq", "isahc", "surf", "rustls", "openssl",
];

#[test]
fn core_pulls_in_no_aws_sdk_and_no_http_client() {
    let Ok(cargo) = std::env::var("CARGO") else {
        eprintln!("skipped: CARGO is not set, so the dependency tree cannot be listed (run under cargo test)");
        return;
    };
    let out = std::process::Command::new(cargo)
        .args([
            "tree",
            "-p",
            "infinity-agent-core",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8(out.stdout).unwrap();
    assert!(tree.contains("jsonschema"), "unexpected tree:\n{tree}");
    for line in tree.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        assert!(
            !FORBIDDEN.iter().any(|f| name.starts_with(f)),
            "core depends on {name}"
        );
    }
}
