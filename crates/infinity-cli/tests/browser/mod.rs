//! A headless Chromium driven over the DevTools protocol (CDP): open a page, run JavaScript in
//! it, click and type as a person does (real input events, not `element.click()`), take
//! screenshots, and collect every console error and uncaught exception the page produces.
//!
//! The protocol is JSON over one WebSocket: commands `{id, method, params, sessionId}` get a
//! response with the same `id`; events `{method, params}` come in between. One page target is
//! attached in flat mode, so its commands carry its `sessionId`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

/// How long one command, or one wait for a condition, may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// How long chromium may take to start and open its DevTools port.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(90);

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, String>>>>>;

/// The Chromium binary: `$CHROMIUM`, or `chromium`, `chromium-browser`, `google-chrome` on the
/// `PATH`. `Err` names where it looked.
pub fn find_chromium() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("CHROMIUM") {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(path.display().to_string())
        };
    }
    let dirs: Vec<PathBuf> =
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).collect();
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in &dirs {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    Err(format!(
        "{} (chromium, chromium-browser or google-chrome; or set CHROMIUM)",
        std::env::join_paths(&dirs)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    ))
}

/// The Chromium binary, or `None` after saying on stderr that the test is skipped and how to
/// install it.
pub fn chromium_or_skip() -> Option<PathBuf> {
    match find_chromium() {
        Ok(path) => Some(path),
        Err(searched) => {
            eprintln!(
                "skipped: chromium not found at {searched}; install it with apt-get install chromium"
            );
            None
        }
    }
}

/// Where screenshots go: `target/web-screenshots/` (`$CARGO_TARGET_DIR/web-screenshots/`).
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let dir = target.join("web-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A running headless Chromium with one page; killed when dropped.
pub struct Browser {
    process: Child,
    _profile: tempfile::TempDir,
    outgoing: mpsc::UnboundedSender<String>,
    pending: Pending,
    next_id: AtomicU64,
    session: String,
    problems: Arc<Mutex<Vec<String>>>,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

impl Browser {
    /// Starts `chromium` headless with a fresh profile and opens one blank page of
    /// `width` x `height` CSS pixels.
    pub async fn launch(chromium: &Path, width: u32, height: u32) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let mut command = Command::new(chromium);
        command
            .arg("--headless=new")
            .arg("--remote-debugging-port=0")
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args([
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--metrics-recording-only",
                "--mute-audio",
            ])
            .arg(format!("--window-size={width},{height}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // Chromium's sandbox refuses to run as root (CI containers).
        if std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0) {
            command.arg("--no-sandbox");
        }
        let mut process = command.arg("about:blank").spawn().unwrap();

        // Chromium writes the port it picked, and the browser's WebSocket path, to this file.
        let port_file = profile.path().join("DevToolsActivePort");
        let started = tokio::time::Instant::now();
        let endpoint = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                let mut lines = text.lines();
                if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                    break format!("ws://127.0.0.1:{port}{path}");
                }
            }
            if let Ok(Some(status)) = process.try_wait() {
                panic!("chromium exited ({status}) before it opened its DevTools port");
            }
            // Starting takes longer than any step of a page: the whole suite starts beside it
            // on two cores (emulators, other browsers).
            if started.elapsed() >= LAUNCH_TIMEOUT {
                // Not left running after the test fails (it is no `Browser` yet to drop).
                let _ = process.kill();
                let _ = process.wait();
                panic!("chromium did not open its DevTools port within {LAUNCH_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let (socket, _) = tokio_tungstenite::connect_async(endpoint.as_str())
            .await
            .unwrap();
        let (mut sink, mut stream) = socket.split();

        let (outgoing, mut to_send) = mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            while let Some(text) = to_send.recv().await {
                if sink.send(Message::Text(text.into())).await.is_err() {
                    break;
                }
            }
        });
        let pending: Pending = Arc::default();
        let problems: Arc<Mutex<Vec<String>>> = Arc::default();
        {
            let pending = Arc::clone(&pending);
            let problems = Arc::clone(&problems);
            tokio::spawn(async move {
                while let Some(Ok(message)) = stream.next().await {
                    let Message::Text(text) = message else {
                        continue;
                    };
                    let Ok(value) = serde_json::from_str::<Value>(text.as_str()) else {
                        continue;
                    };
                    if let Some(id) = value["id"].as_u64() {
                        let answer = match value.get("error") {
                            Some(error) => Err(error.to_string()),
                            None => Ok(value["result"].clone()),
                        };
                        if let Some(waiting) = pending.lock().unwrap().remove(&id) {
                            let _ = waiting.send(answer);
                        }
                    } else if let Some(problem) = problem_of(&value) {
                        problems.lock().unwrap().push(problem);
                    }
                }
            });
        }

        let mut browser = Browser {
            process,
            _profile: profile,
            outgoing,
            pending,
            next_id: AtomicU64::new(1),
            session: String::new(),
            problems,
        };
        let target = browser
            .command("Target.createTarget", json!({"url": "about:blank"}))
            .await;
        let attached = browser
            .command(
                "Target.attachToTarget",
                json!({"targetId": target["targetId"], "flatten": true}),
            )
            .await;
        browser.session = attached["sessionId"].as_str().unwrap().to_owned();
        for domain in ["Page.enable", "Runtime.enable", "Log.enable"] {
            browser.call(domain, json!({})).await;
        }
        browser.resize(width, height).await;
        browser
    }

    /// A browser-level command (no session).
    async fn command(&self, method: &str, params: Value) -> Value {
        self.send(method, params, None)
            .await
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    /// A command to the page.
    pub async fn call(&self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.send(method, params, Some(&session))
            .await
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    async fn send(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Value, String> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        self.outgoing
            .send(message.to_string())
            .map_err(|_| "the DevTools connection is closed".to_owned())?;
        match tokio::time::timeout(TIMEOUT, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err("the DevTools connection closed before answering".to_owned()),
            Err(_) => Err(format!("no answer within {TIMEOUT:?}")),
        }
    }

    /// Sets the page's viewport.
    pub async fn resize(&self, width: u32, height: u32) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        )
        .await;
    }

    /// Opens `url` and waits until the document has loaded.
    pub async fn open(&self, url: &str) {
        self.call("Page.navigate", json!({"url": url})).await;
        self.wait_for(
            &format!("{url} to load"),
            "document.readyState === 'complete'",
        )
        .await;
    }

    /// The value of a JavaScript expression (promises are awaited); `Err` for an exception.
    pub async fn try_eval(&self, expression: &str) -> Result<Value, String> {
        let answer = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        match answer.get("exceptionDetails") {
            Some(details) => Err(details["exception"]["description"]
                .as_str()
                .unwrap_or_else(|| details["text"].as_str().unwrap_or("an exception"))
                .to_owned()),
            None => Ok(answer["result"]["value"].clone()),
        }
    }

    /// The value of a JavaScript expression; panics on an exception.
    pub async fn eval(&self, expression: &str) -> Value {
        self.try_eval(expression)
            .await
            .unwrap_or_else(|e| panic!("{expression}: {e}"))
    }

    /// Waits until `expression` is truthy (it is evaluated every 100 ms) and returns its value;
    /// panics naming `what` after the timeout.
    pub async fn wait_for(&self, what: &str, expression: &str) -> Value {
        let started = tokio::time::Instant::now();
        let mut last = Value::Null;
        while started.elapsed() < TIMEOUT {
            last = match self.try_eval(expression).await {
                Ok(value) if truthy(&value) => return value,
                Ok(value) => value,
                Err(error) => Value::String(error),
            };
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let body = self
            .try_eval("document.body ? document.body.innerText : ''")
            .await
            .unwrap_or_default();
        panic!(
            "timed out waiting for {what} ({expression} was {last})\nconsole problems: {:#?}\npage text:\n{}",
            self.problems(),
            body.as_str().unwrap_or_default()
        );
    }

    /// Clicks the first element `selector` matches whose text is `text` (any text when `None`)
    /// with the mouse: scrolled into view, pressed and released at its centre.
    pub async fn click(&self, selector: &str, text: Option<&str>) {
        let find = format!(
            "(() => {{
                const wanted = {text};
                const element = [...document.querySelectorAll({selector})]
                    .find((e) => wanted === null || e.textContent.trim() === wanted);
                if (!element) return null;
                element.scrollIntoView({{block: 'center', inline: 'center'}});
                const box = element.getBoundingClientRect();
                return {{x: box.left + box.width / 2, y: box.top + box.height / 2,
                         disabled: Boolean(element.disabled)}};
            }})()",
            selector = json!(selector),
            text = json!(text),
        );
        let at = self
            .wait_for(&format!("{selector} {text:?} to click"), &find)
            .await;
        assert_eq!(at["disabled"], false, "{selector} {text:?} is disabled");
        let (x, y) = (at["x"].clone(), at["y"].clone());
        self.call(
            "Input.dispatchMouseEvent",
            json!({"type": "mouseMoved", "x": x, "y": y}),
        )
        .await;
        for kind in ["mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
            )
            .await;
        }
    }

    /// Types `text` into the focused element.
    pub async fn type_text(&self, text: &str) {
        self.call("Input.insertText", json!({"text": text})).await;
    }

    /// Presses a key (`Enter`, `Tab`) in the focused element, optionally with Shift.
    pub async fn press(&self, key: &str, shift: bool) {
        let (code, text) = match key {
            "Enter" => (13, "\r"),
            "Tab" => (9, ""),
            other => panic!("no key code for {other}"),
        };
        let modifiers = if shift { 8 } else { 0 };
        let mut down = json!({"type": "keyDown", "key": key, "code": key,
            "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code, "modifiers": modifiers});
        if !text.is_empty() {
            down["text"] = json!(text);
        }
        self.call("Input.dispatchKeyEvent", down).await;
        self.call(
            "Input.dispatchKeyEvent",
            json!({"type": "keyUp", "key": key, "code": key,
                "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code, "modifiers": modifiers}),
        )
        .await;
    }

    /// Saves a PNG of the viewport to `dir/name.png` and returns its path.
    pub async fn screenshot(&self, dir: &Path, name: &str) -> PathBuf {
        let shot = self
            .call("Page.captureScreenshot", json!({"format": "png"}))
            .await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// The console errors, uncaught exceptions and error log entries seen so far.
    pub fn problems(&self) -> Vec<String> {
        self.problems.lock().unwrap().clone()
    }

    /// Forgets the problems seen so far whose text contains `expected` (and returns them).
    pub fn expect_problems(&self, expected: &str) -> Vec<String> {
        let mut problems = self.problems.lock().unwrap();
        let (matching, other): (Vec<String>, Vec<String>) =
            problems.drain(..).partition(|p| p.contains(expected));
        *problems = other;
        matching
    }
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// A console error, an uncaught exception or an error log entry, as text; `None` for other
/// events.
fn problem_of(event: &Value) -> Option<String> {
    let params = &event["params"];
    match event["method"].as_str()? {
        "Runtime.consoleAPICalled"
            if matches!(params["type"].as_str(), Some("error" | "assert")) =>
        {
            let args: Vec<String> = params["args"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| {
                    a["value"]
                        .as_str()
                        .map(str::to_owned)
                        .or_else(|| a["description"].as_str().map(str::to_owned))
                        .unwrap_or_else(|| a.to_string())
                })
                .collect();
            Some(format!("console.error: {}", args.join(" ")))
        }
        "Runtime.exceptionThrown" => {
            let details = &params["exceptionDetails"];
            Some(format!(
                "exception: {}",
                details["exception"]["description"]
                    .as_str()
                    .or(details["text"].as_str())
                    .unwrap_or("(no description)")
            ))
        }
        "Log.entryAdded" if params["entry"]["level"] == "error" => Some(format!(
            "log ({}): {} {}",
            params["entry"]["source"].as_str().unwrap_or(""),
            params["entry"]["text"].as_str().unwrap_or(""),
            params["entry"]["url"].as_str().unwrap_or("")
        )),
        _ => None,
    }
}
