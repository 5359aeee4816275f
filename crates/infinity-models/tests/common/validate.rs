//! Request bodies judged by the providers' own definitions: `tests/validate/validate.py` (the
//! SDKs' request types and botocore's service model, plus the rules the APIs enforce beyond
//! them), run from the test venv. One validator process serves a whole test binary: started at
//! the first use, fed one body a line over stdin, answering one verdict a line.
//!
//! Without the test venv (no `make tools`, and `INFINITY_REQUIRE_TOOLS` unset), a test server
//! judges nothing and says so on stderr, and the tests of the validator itself are skipped.

// Two test binaries share this module and each uses a part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};

use infinity_test_support::{ready, repo, Tools};
use serde_json::{json, Value};

/// Whose definitions judge a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// `messages.create` with `stream: true`.
    Anthropic,
    /// `chat.completions.create` with `stream: true`.
    OpenAi,
    /// `Converse` (its REST JSON body; the model id is in the URL).
    Bedrock,
}

impl Provider {
    fn as_str(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
            Provider::Bedrock => "bedrock",
        }
    }

    /// The provider a golden body is for, from its file name's first word (`openai_x.json`).
    pub fn of_file(name: &str) -> Option<Self> {
        match name.split('_').next()? {
            "anthropic" => Some(Provider::Anthropic),
            "openai" => Some(Provider::OpenAi),
            "bedrock" => Some(Provider::Bedrock),
            _ => None,
        }
    }
}

struct Process {
    _child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// The process, or why it could not start (every later use fails with the same reason).
static VALIDATOR: OnceLock<Mutex<Result<Process, String>>> = OnceLock::new();

fn python() -> PathBuf {
    repo().join(".venv/bin/python")
}

fn spawn() -> Result<Process, String> {
    let python = python();
    if !python.exists() {
        return Err(format!(
            "the request validator runs in the test venv, and {} is missing: run `make tools`",
            python.display()
        ));
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/validate/validate.py");
    let cache = concat!(env!("CARGO_TARGET_TMPDIR"), "/validate");
    let mut child = Command::new(&python)
        .args([script, "serve", "--cache", cache])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e} (run `make tools`)", python.display()))?;
    let stdin = child.stdin.take().ok_or("the validator has no stdin")?;
    let stdout = child.stdout.take().ok_or("the validator has no stdout")?;
    Ok(Process {
        _child: child,
        stdin,
        stdout: BufReader::new(stdout),
    })
}

/// Starts the validator now, so that its start (and a first build of its cache) is not charged
/// to a test that measures time; for a test server, which judges what it receives. Without the
/// test venv, says on stderr that the test's bodies are not judged.
pub fn start() {
    if !ready(Tools::Venv) {
        eprintln!(
            "not checked: the bodies against the providers' definitions, which needs the test \
             venv (.venv); run `make tools` (or `make test`)"
        );
        return;
    }
    VALIDATOR.get_or_init(|| Mutex::new(spawn()));
}

/// Why the provider would refuse `body`, each as `path: rule`; empty when it would take it.
/// Panics when the validator cannot run (no venv: run `make tools`) or did not understand.
pub fn errors(provider: Provider, body: &Value) -> Vec<String> {
    VALIDATOR.get_or_init(|| Mutex::new(spawn()));
    let verdict = {
        let mut process = VALIDATOR
            .get()
            .expect("started above")
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match &mut *process {
            Err(why) => Err(why.clone()),
            Ok(process) => ask(process, provider, body),
        }
    };
    match verdict {
        Ok(verdict) => match verdict.get("errors").and_then(Value::as_array) {
            Some(errors) => errors
                .iter()
                .map(|e| e.as_str().unwrap_or_default().to_owned())
                .collect(),
            None => panic!("the request validator failed: {verdict}"),
        },
        Err(why) => panic!("{why}"),
    }
}

fn ask(process: &mut Process, provider: Provider, body: &Value) -> Result<Value, String> {
    let request = json!({"provider": provider.as_str(), "body": body});
    let gone = |e: std::io::Error| format!("the request validator stopped: {e}");
    writeln!(process.stdin, "{request}").map_err(gone)?;
    process.stdin.flush().map_err(gone)?;
    let mut line = String::new();
    if process.stdout.read_line(&mut line).map_err(gone)? == 0 {
        return Err("the request validator stopped (its error is above)".into());
    }
    serde_json::from_str(&line).map_err(|e| format!("the validator answered {line:?}: {e}"))
}

/// Fails, naming every error, unless the provider would take `body`.
pub fn assert_valid(provider: Provider, body: &Value, what: &str) {
    let errors = errors(provider, body);
    assert!(
        errors.is_empty(),
        "{} would refuse {what}:\n  {}",
        provider.as_str(),
        errors.join("\n  ")
    );
}

/// What a test server received that its provider would refuse. A server judges each body it
/// receives, answers a refused one as its provider would (a 400), and fails its test when it is
/// dropped with any refused ([`Refusals::assert_none`]).
#[derive(Debug, Default)]
pub struct Refusals(Mutex<Vec<String>>);

impl Refusals {
    /// Judges `body` (a blocking call: from async code, run it with `spawn_blocking`); the
    /// provider's errors on one line when it would refuse it, recorded. Without the test venv,
    /// nothing (see the module doc).
    pub fn judge(&self, provider: Provider, body: &Value) -> Option<String> {
        if !ready(Tools::Venv) {
            return None;
        }
        let errors = errors(provider, body);
        if errors.is_empty() {
            return None;
        }
        let why = errors.join("; ");
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(format!("{}: {why}", provider.as_str()));
        Some(why)
    }

    /// Fails, naming each refused body's errors, unless none was refused; does nothing while a
    /// test is already failing.
    pub fn assert_none(&self) {
        if std::thread::panicking() {
            return;
        }
        let refused = self.0.lock().unwrap_or_else(|p| p.into_inner());
        assert!(
            refused.is_empty(),
            "the adapter sent bodies its provider would refuse:\n  {}",
            refused.join("\n  ")
        );
    }
}
