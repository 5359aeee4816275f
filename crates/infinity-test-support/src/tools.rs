//! The tools `make tools` installs (`infra/local/install.sh`), which some tests need: the test
//! venv (`.venv`: moto, boto3, the providers' SDKs) and the local AWS emulators (DynamoDB Local,
//! or LocalStack with `INFINITY_EMULATOR=localstack`).
//!
//! A test that needs them asks [`ready_or_skip`] first. On a machine without them it says on
//! stderr that it is skipped and how to run it, and passes: `cargo test --workspace` works
//! without `make tools`, and installs nothing. With [`REQUIRE`] set, as `make test` sets it, the
//! test goes on whatever is installed, and fails loudly when something is missing: CI never
//! skips one silently.

use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The variable that makes the tests that need the tools run, and fail without them, instead of
/// being skipped (`INFINITY_REQUIRE_TOOLS=1`; empty or `0` is unset).
pub const REQUIRE: &str = "INFINITY_REQUIRE_TOOLS";

/// What a test needs of what `make tools` installs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tools {
    /// The test venv (`.venv`): Python with moto, boto3 and the providers' SDKs.
    Venv,
    /// The local AWS emulators (`INFINITY_EMULATOR` chooses them), with the venv that sets their
    /// stacks up.
    Emulators,
}

impl Tools {
    /// What `install.sh --check` is asked to check.
    fn check(self) -> &'static str {
        match self {
            Tools::Venv => "venv",
            Tools::Emulators => "all",
        }
    }

    /// What a person reads in the line that says a test is skipped.
    fn what(self) -> &'static str {
        match self {
            Tools::Venv => "the test venv (.venv)",
            Tools::Emulators => "the local AWS emulators",
        }
    }
}

/// Whether a test may use `tools`: [`REQUIRE`] is set (then it goes on, and fails saying what is
/// missing), or `make tools` installed them (`install.sh --check` says so; asked once per test
/// binary).
pub fn ready(tools: Tools) -> bool {
    required() || installed(tools)
}

/// [`ready`]; when not, first says on stderr, in one line, that the test is skipped and how to
/// run it.
pub fn ready_or_skip(tools: Tools) -> bool {
    let ready = ready(tools);
    if !ready {
        eprintln!(
            "skipped: needs {}; run `make tools` (or `make test`)",
            tools.what()
        );
    }
    ready
}

fn required() -> bool {
    std::env::var_os(REQUIRE).is_some_and(|value| !value.is_empty() && value != "0")
}

/// What `infra/local/install.sh --check` says of `tools`, which installs nothing.
fn installed(tools: Tools) -> bool {
    static VENV: OnceLock<bool> = OnceLock::new();
    static EMULATORS: OnceLock<bool> = OnceLock::new();
    let answer = match tools {
        Tools::Venv => &VENV,
        Tools::Emulators => &EMULATORS,
    };
    *answer.get_or_init(|| {
        let repo = crate::repo();
        Command::new("bash")
            .arg(repo.join("infra/local/install.sh"))
            .args(["--check", tools.check()])
            .current_dir(&repo)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    })
}
