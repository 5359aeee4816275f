//! The web app `infinity serve` serves: its files and their headers over HTTP, then a person's
//! visit in a real headless Chromium, driven over the DevTools protocol: an empty list, a new
//! conversation with a streamed answer, child threads in the tree until they close, a widget
//! whose button the agent answers, a tool server's question answered by a click, a reconnect
//! and a reload that keep the transcript as it was, and no console error all along.

use crate::browser;
use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};

use browser::Browser;
use common::{free_port, until, Server};
use infinity_rap::kit::testing::LocalServer;
use infinity_rap::kit::{tool_definition, Call, CallbackError, ToolServer};
use infinity_rap::wire::{DiffContent, DisplaySegment};
use serde_json::{json, Value};

const TOKEN: &str = "web-test-token";

const SCRIPT: &str = r#"
rules:
  # Each helper closes at once with a final report to its parent.
  - thread: child
    scope: all
    when: "Your task: (\\w+)[\\s\\S]*Your thread ID is ([A-Za-z0-9_-]+)\\."
    reply:
      tool_calls:
        - {name: close_thread, args: {thread_id: "$2", report_to_parent: "$1 is done."}}
  - thread: root
    when: "^hello$"
    reply:
      delay_ms: 1000
      text: "Hello there! Two helpers are starting."
      tool_calls:
        - {name: set_title, args: {title: "Web test"}}
        - {name: plan_create, args: {steps: ["Start the helpers", "Show a widget", "Ask a question"]}}
        - {name: spawn_thread, args: {instructions: "alpha", child_of: "${stack}"}}
        - {name: spawn_thread, args: {instructions: "beta", child_of: "${stack}"}}
  - thread: root
    when: "Child thread spawned with ID"
    reply: {text: "The helpers are on it."}
  - thread: root
    when: "Final report from child thread [A-Za-z0-9_-]+ \\(the child has shut down\\): (\\w+) is done"
    reply: {text: "Noted: $1 is done."}
  - thread: root
    when: "^show widget$"
    reply:
      tool_calls:
        - {name: plan_update, args: {step: 1, status: completed}}
        - name: widget
          args:
            ui:
              type: ui
              title: Cake order
              children:
                - {type: text, text: "Which flavour would you like?"}
                - {type: row, children: [{type: badge, text: fresh, tone: success}, {type: badge, text: "2 left", tone: warning}]}
                - {type: select, name: flavour, label: Flavour, options: [chocolate, lemon]}
                - {type: input, name: note, label: Note, placeholder: "for the card"}
                - {type: button, label: Order, action: order}
  - thread: root
    when: "The widget is shown"
    reply: {text: "Pick a flavour above."}
  - thread: root
    when: "pressed `order` with \\{.*\"flavour\":\"(\\w+)\""
    reply: {text: "Ordering a $1 cake."}
  - thread: root
    when: "^pick$"
    reply:
      tool_calls: [{name: pick_colour, args: {}}]
  - thread: root
    when: "picked (\\w+)"
    reply: {text: "You picked $1."}
  # A client tool the test answers as its application would, once a person approved the call.
  - thread: root
    when: "^measure$"
    reply:
      tool_calls: [{name: measure, args: {what: "the table"}}]
  - thread: root
    when: "-> (\\d+ cm)$"
    reply: {text: "It measures $1."}
  - thread: root
    when: "^wrap up$"
    reply:
      tool_calls:
        - name: finish
          args:
            status: succeeded
            result:
              cake: lemon
              colour: blue
              order: {customer_reference_number: ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789}
  # The first stream breaks off after three words; the runtime asks again.
  - thread: root
    when: "(?m)^flaky$"
    reply: {text: "A first try, then the whole answer.", break_after: 3}
  # (After an interrupt, the text a rule sees starts with its notice.)
  - thread: root
    when: "(?m)^nap$"
    reply:
      tool_calls: [{name: sleep, args: {seconds: 3600}}]
  - thread: root
    when: "Sleep interrupted: new input arrived"
    reply: {text: "Awake now."}
  # Markdown, with what a hostile text would try.
  - thread: root
    when: "(?m)^markdown$"
    reply: {text: "**Bold** move, see [the docs](https://example.com/docs) or [this](javascript:window.__xss=1).\n\n<img src=x onerror=\"window.__xss=2\"><script>window.__xss=3</script>\n\n| a | b |\n|---|---|\n| 1 | 2 |"}
  - reply: {text: "ok"}
"#;

/// The `pick_colour` tool: shows a `palette` view, asks the person to pick a colour, and
/// answers with the pick, displayed as a diff.
async fn pick_colour(call: Call) -> Result<(), CallbackError> {
    let mut palette = serde_json::Map::new();
    palette.insert("colours".into(), json!(["red", "blue"]));
    call.view_update("palette", palette).await?;
    let colours = ["red", "blue"];
    let picked = call.user_choice("Which colour?", colours, 0).await?;
    let colour = colours.get(picked).copied().unwrap_or("red");
    let diff = DiffContent {
        path: "palette.txt".to_owned(),
        patch: format!("--- a/palette.txt\n+++ b/palette.txt\n@@ -1 +1 @@\n-none\n+{colour}\n"),
    };
    call.result_displayed(
        format!("picked {colour}"),
        vec![
            DisplaySegment::Diff(diff),
            DisplaySegment::Text(format!("palette.txt: {colour}")),
        ],
    )
    .await
}

async fn colour_server() -> LocalServer {
    let server = ToolServer::new("palette", "Colours").tool(
        tool_definition(
            "pick_colour",
            "Asks the user to pick a colour.",
            json!({"type": "object", "additionalProperties": false}),
        ),
        pick_colour,
    );
    LocalServer::start(server).await.unwrap()
}

/// `infinity serve` with the scripted agent (and `tool_server`, if any), the token [`TOKEN`]
/// and its store in `dir`, on a free port; returns it with its base URL once it answers.
async fn serve(dir: &Path, tool_server: Option<&str>) -> (Server, String) {
    std::fs::write(dir.join("script.yaml"), SCRIPT).unwrap();
    let servers = tool_server
        .map(|url| format!("tool_servers: [{url}]\n"))
        .unwrap_or_default();
    std::fs::write(
        dir.join("agent.yaml"),
        // Prices for the script (a tenth of a cent a token), so the conversation costs money.
        format!(
            "name: webtest\nmodel: script:script.yaml\nprices: {{input: 1000, output: 1000}}\n\
             client_tools:\n  - {{name: measure, description: Measures a thing., deadline: 1d}}\n\
             approvals:\n  - {{tools: [measure], deadline: 1d}}\n{servers}"
        ),
    )
    .unwrap();
    let base = format!("http://127.0.0.1:{}", free_port());
    (start(dir, &base).await, base)
}

/// Starts `infinity serve` for the agent and store in `dir` at `base` (again, after a stop).
async fn start(dir: &Path, base: &str) -> Server {
    let port = base.rsplit(':').next().unwrap();
    let server = Server(
        Command::new(env!("CARGO_BIN_EXE_infinity"))
            .args(["serve", "--agent"])
            .arg(dir.join("agent.yaml"))
            .arg("--store")
            .arg(dir.join("store"))
            .args(["--port", port])
            // The model the test switches a thread to (the only one allowed besides the agent's).
            .args(["--allow-model", "script:other.script.yaml"])
            .env("INFINITY_SERVE_TOKEN", TOKEN)
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    until("the server to start", || async {
        reqwest::get(format!("{base}/health")).await.is_ok()
    })
    .await;
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_its_files_are_served_with_a_strict_policy_and_the_api_stays_guarded() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, base) = serve(dir.path(), None).await;
    let client = reqwest::Client::new();

    // The page and its files need no token (a browser cannot add one to a module import), and
    // carry a policy that runs this server's scripts only.
    for (path, media_type) in [
        ("/", "text/html"),
        ("/app/app.js", "text/javascript"),
        ("/app/transcript.js", "text/javascript"),
        ("/app/style.css", "text/css"),
    ] {
        let response = client.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        assert!(header("content-type").starts_with(media_type), "{path}");
        let policy = header("content-security-policy");
        assert!(
            policy.contains("default-src 'none'") && policy.contains("script-src 'self';"),
            "{path}: {policy}"
        );
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
    }
    let page = client
        .get(&base)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains(r#"<script type="module" src="/app/app.js">"#));
    assert!(
        !page.contains("<script>"),
        "no inline script: the policy would block it"
    );

    let missing = client
        .get(format!("{base}/app/nope.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert!(missing.text().await.unwrap().contains("`nope.js`"));

    // The page's files keep the guard's Host check (no DNS rebinding).
    let rebound = client
        .get(format!("{base}/app/app.js"))
        .header("Host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);

    // The API still needs the token.
    let anonymous = client.get(format!("{base}/threads")).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let listed = client
        .get(format!("{base}/threads"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);

    // A widget action names what is wrong with it.
    let press = |thread: &str, body: Value| {
        client
            .post(format!("{base}/threads/{thread}/widget-actions"))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
    };
    let unknown = press("nobody", json!({"action": "order"})).await.unwrap();
    assert_eq!(unknown.status(), 404);
    assert!(unknown.text().await.unwrap().contains("no thread nobody"));
    let empty = press("nobody", json!({"action": " "})).await.unwrap();
    assert_eq!(empty.status(), 400);
    assert!(empty.text().await.unwrap().contains("`action` is empty"));
    let wrong = press("nobody", json!({"button": "order"})).await.unwrap();
    assert_eq!(wrong.status(), 422);
    assert!(wrong.text().await.unwrap().contains("button"));

    // A closed thread takes no presses.
    let post = |path: &str, body: Value| {
        client
            .post(format!("{base}{path}"))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
    };
    let sent = post("/threads/shop/messages", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(sent.status(), 202);
    until("the thread to exist", || async {
        let found = client
            .get(format!("{base}/threads/shop"))
            .bearer_auth(TOKEN)
            .send()
            .await;
        found.is_ok_and(|r| r.status() == 200)
    })
    .await;
    let closing = post("/threads/shop/close", json!({})).await.unwrap();
    assert_eq!(closing.status(), 202);
    until("the thread to close", || async {
        let Ok(found) = client
            .get(format!("{base}/threads/shop"))
            .bearer_auth(TOKEN)
            .send()
            .await
        else {
            return false;
        };
        found
            .json::<Value>()
            .await
            .is_ok_and(|r| r["status"] == "closed")
    })
    .await;
    let late = press("shop", json!({"action": "order"})).await.unwrap();
    assert_eq!(late.status(), 409);
    assert!(late.text().await.unwrap().contains("closed"));
}

/// The texts of the transcript's entries, in order.
const ENTRIES: &str =
    "[...document.querySelectorAll('#transcript > li')].map((li) => li.innerText.trim())";

/// The transcript's entries once every agent text is rendered from Markdown.
async fn entries(browser: &Browser) -> serde_json::Value {
    browser
        .wait_for(
            "the agent's texts rendered",
            "!document.querySelector('#transcript [data-markdown=pending]')",
        )
        .await;
    browser.eval(ENTRIES).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_uses_the_web_app_in_a_real_browser() {
    let Some(chromium) = browser::chromium_or_skip() else {
        return;
    };
    let tools = colour_server().await;
    let dir = tempfile::tempdir().unwrap();
    let (server, base) = serve(dir.path(), Some(tools.base_url())).await;
    let shots = browser::screenshot_dir();
    let browser = Browser::launch(&chromium, 1280, 900).await;

    // An empty store: the list says so.
    browser.open(&format!("{base}/?access_token={TOKEN}")).await;
    browser
        .wait_for(
            "the placeholder of an empty list",
            "!document.getElementById('no-threads').hidden \
             && document.getElementById('no-threads').innerText.includes('No conversations yet')",
        )
        .await;
    browser.screenshot(&shots, "01-empty").await;

    // A new conversation: the message box has the focus; Enter sends.
    browser.click("#new-conversation", None).await;
    browser
        .wait_for(
            "the new conversation, connected, with the focus in the message box",
            "document.activeElement.id === 'message' \
             && document.getElementById('connection').textContent === 'live'",
        )
        .await;
    browser
        .eval(
            "window.sawStreaming = false; new MutationObserver(() => { \
               if (document.querySelector('.msg.streaming')) window.sawStreaming = true; \
             }).observe(document.body, {subtree: true, childList: true, characterData: true}); true",
        )
        .await;
    browser.type_text("hello").await;
    browser.press("Enter", false).await;
    // The model takes a second: meanwhile the thread shows as running.
    browser
        .wait_for(
            "the thread to show as running",
            "document.getElementById('thread-status').innerText === 'running'",
        )
        .await;
    browser
        .wait_for(
            "the answer",
            "[...document.querySelectorAll('.msg.assistant:not(.streaming)')]\
               .some((m) => m.innerText.includes('Hello there! Two helpers are starting.'))",
        )
        .await;
    assert_eq!(
        browser.eval("window.sawStreaming").await,
        true,
        "the answer was streamed in before it was complete"
    );
    assert_eq!(
        browser
            .eval("document.getElementById('message').value")
            .await,
        "",
        "the sent message left the box"
    );

    // The two helpers show in the tree, report, and close; the list has the title.
    browser
        .wait_for(
            "both children closed in the tree, with their reports",
            "document.querySelectorAll('#tree ul .tree-node > .status-closed').length === 2 \
             && [...document.querySelectorAll('#tree .report')].map((r) => r.innerText).sort().join() \
                === 'alpha is done.,beta is done.'",
        )
        .await;
    browser
        .wait_for(
            "the title in the list and the header",
            "document.querySelector('#thread-list .thread-name').innerText === 'Web test' \
             && document.getElementById('thread-title').innerText === 'Web test'",
        )
        .await;
    browser
        .wait_for(
            "the plan as a checklist",
            "document.querySelectorAll('#plan .step').length === 3",
        )
        .await;
    browser
        .wait_for(
            "the root's answer to a report",
            "document.getElementById('transcript').innerText.includes('is done.')",
        )
        .await;
    browser.screenshot(&shots, "02-conversation").await;

    // A child opens in the view; its breadcrumb leads back.
    browser.click("#tree ul .tree-node > a", None).await;
    browser
        .wait_for(
            "the child's view",
            "!document.getElementById('breadcrumb').hidden \
             && document.querySelector('#transcript [data-tool=close_thread]') !== null \
             && document.getElementById('thread-status').innerText === 'closed' \
             && !document.getElementById('closed-note').hidden",
        )
        .await;
    // What it inherited, the parent's call that spawned it included, is folded above a line.
    assert_eq!(
        browser
            .eval(
                "document.querySelector('#transcript > .inherited [data-tool=spawn_thread]') !== null \
                 && document.querySelector('#transcript > [data-tool=spawn_thread]') === null \
                 && document.querySelector('#transcript > .inherited + .divider')?.innerText",
            )
            .await,
        "This thread starts here",
        "the child's inherited entries, folded"
    );
    browser.screenshot(&shots, "03-child").await;
    browser.click("#breadcrumb a", None).await;
    browser
        .wait_for(
            "the root's view again",
            "document.getElementById('breadcrumb').hidden \
             && document.getElementById('connection').textContent === 'live' \
             && document.getElementById('transcript').innerText.includes('Hello there')",
        )
        .await;

    // A widget: real controls; its button sends the action with the values, the agent answers.
    browser.click("#message", None).await;
    browser.type_text("show widget").await;
    browser.press("Enter", false).await;
    browser
        .wait_for(
            "the widget",
            "document.querySelector('.widget select[data-field=flavour]') !== null \
             && document.querySelectorAll('.widget .badge').length === 2 \
             && document.getElementById('transcript').innerText.includes('Pick a flavour above.')",
        )
        .await;
    browser
        .eval(
            "const select = document.querySelector('.widget select[data-field=flavour]'); \
             select.value = 'lemon'; select.dispatchEvent(new Event('change')); true",
        )
        .await;
    browser.click(".widget-button", Some("Order")).await;
    browser
        .wait_for(
            "the agent's answer to the button",
            "document.querySelector('.msg.action') !== null \
             && document.getElementById('transcript').innerText.includes('Ordering a lemon cake.')",
        )
        .await;
    browser
        .wait_for(
            "the plan's first step done",
            "document.querySelector('#plan .step').classList.contains('step-completed')",
        )
        .await;
    browser.screenshot(&shots, "04-widget").await;

    // A tool server's question, answered by a click; its view and its diff result show.
    browser.click("#message", None).await;
    browser.type_text("pick").await;
    browser.press("Enter", false).await;
    browser
        .wait_for(
            "the question, the tool's view, and the thread waiting on the tool",
            "document.querySelector('.question .prompt')?.innerText === 'Which colour?' \
             && document.querySelector('#views [data-view=palette]') !== null \
             && document.getElementById('thread-status').innerText === 'waiting on pick_colour'",
        )
        .await;
    browser.screenshot(&shots, "05-question").await;
    browser.click(".question .choice", Some("blue")).await;
    browser
        .wait_for(
            "the answer to reach the agent",
            "document.querySelector('.question') === null \
             && document.getElementById('transcript').innerText.includes('You picked blue.') \
             && [...document.querySelectorAll('.diff .diff-add')].some((l) => l.innerText.trim() === '+blue')",
        )
        .await;
    browser.screenshot(&shots, "06-answered").await;

    // Any tool may wait for a person's approval: asked like a tool server's question, with the
    // arguments; approved, a client tool's call waits for its application, whose answer the
    // model reads.
    browser.click("#message", None).await;
    browser.type_text("measure").await;
    browser.press("Enter", false).await;
    browser
        .wait_for(
            "the approval question, its call and the thread waiting for it",
            "document.querySelector('.question .prompt')?.innerText.includes('Run the tool `measure`') \
             && document.querySelector('.question .prompt').innerText.includes('\"what\": \"the table\"') \
             && document.querySelector('[data-tool=measure] .call-state')?.innerText === 'waiting for approval' \
             && document.getElementById('thread-status').innerText === 'waiting for your approval of measure'",
        )
        .await;
    browser.screenshot(&shots, "06b-approval").await;
    browser.click(".question .choice", Some("Run it")).await;
    browser
        .wait_for(
            "the approved call waiting for its application",
            "document.querySelector('.question') === null \
             && document.querySelector('[data-tool=measure] .call-state')?.innerText === 'waiting for the application' \
             && document.getElementById('thread-status').innerText === 'waiting on measure'",
        )
        .await;
    let thread = browser.eval("location.hash.replace('#/thread/', '')").await;
    let call = browser
        .eval("document.querySelector('[data-tool=measure]').dataset.call")
        .await;
    let posted = reqwest::Client::new()
        .post(format!(
            "{base}/threads/{}/tool_results/{}",
            thread.as_str().unwrap(),
            call.as_str().unwrap()
        ))
        .bearer_auth(TOKEN)
        .json(&json!({"text": "82 cm"}))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 202, "{}", posted.text().await.unwrap());
    browser
        .wait_for(
            "the application's result, and the agent's answer",
            "document.getElementById('transcript').innerText.includes('It measures 82 cm.') \
             && document.querySelector('[data-tool=measure] .call-state')?.innerText === 'done'",
        )
        .await;

    // The keyboard: Tab leads from the message box to Send, with a visible focus ring.
    browser.click("#message", None).await;
    browser.press("Tab", false).await;
    browser
        .wait_for(
            "the focus on Send, visibly",
            "document.activeElement.textContent === 'Send' \
             && getComputedStyle(document.activeElement).outlineStyle === 'solid'",
        )
        .await;

    // `finish`: its result shows as data; a long value under a long key still gets the room
    // of many characters (not a column one character wide).
    browser.click("#message", None).await;
    browser.type_text("wrap up").await;
    browser.press("Enter", false).await;
    browser
        .wait_for(
            "the result panel, and the thread idle",
            "!document.getElementById('output-panel').hidden \
             && document.querySelector('#output .badge')?.innerText === 'succeeded' \
             && [...document.querySelectorAll('#output dt')].map((d) => d.innerText).join() \
                === 'cake,colour,order,customer_reference_number' \
             && document.getElementById('thread-status').innerText === 'idle'",
        )
        .await;
    let value_width = browser
        .eval(
            "[...document.querySelectorAll('#output dd')] \
               .find((d) => d.innerText === 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789') \
               .getBoundingClientRect().width",
        )
        .await;
    assert!(
        value_width.as_f64().unwrap() > 80.0,
        "the long value's column is {value_width} px wide"
    );
    browser.screenshot(&shots, "07-finished").await;

    // An interrupt with nothing in flight says so, as the runtime's notice does.
    browser.click("#interrupt", None).await;
    browser
        .wait_for(
            "the toast saying the interrupt was sent (not that it is done)",
            "document.getElementById('toast').innerText === 'Interrupt sent'",
        )
        .await;
    browser
        .wait_for(
            "the notice that nothing was running",
            "[...document.querySelectorAll('#transcript > .notice')] \
               .some((n) => n.innerText.includes('Nothing to interrupt: the user interrupted while no call'))",
        )
        .await;
    assert_eq!(
        browser
            .eval("document.getElementById('transcript').innerText.includes('Interrupted by the user.')")
            .await,
        false,
        "an interrupt with nothing in flight shows as no interruption"
    );

    // A stream that breaks off: what it showed is withdrawn, and the new answer streams in its
    // place, so the live text never shows the first try and the second one together.
    browser
        .eval(
            "window.streamTexts = []; new MutationObserver(() => { \
               const live = document.querySelector('.msg.streaming .text'); \
               if (live) window.streamTexts.push(live.innerText); \
             }).observe(document.body, {subtree: true, childList: true, characterData: true}); true",
        )
        .await;
    browser.click("#message", None).await;
    browser.type_text("flaky").await;
    browser.press("Enter", false).await;
    browser
        .wait_for(
            "the answer after the broken stream",
            "[...document.querySelectorAll('.msg.assistant:not(.streaming)')]\
               .some((m) => m.innerText.includes('A first try, then the whole answer.'))",
        )
        .await;
    let texts = browser.eval("window.streamTexts").await;
    let texts: Vec<&str> = texts
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        texts.iter().any(|t| t.trim() == "A first try,"),
        "the broken stream was shown while it lasted: {texts:?}"
    );
    assert!(
        texts.iter().all(|t| t.matches("A first").count() <= 1),
        "the withdrawn text stayed in the live answer: {texts:?}"
    );
    assert_eq!(
        browser
            .eval(
                "[...document.querySelectorAll('#transcript > .msg.assistant')] \
                   .filter((m) => m.innerText.includes('A first try')).length \
                 + document.querySelectorAll('.msg.streaming').length"
            )
            .await,
        1,
        "one answer, and nothing left streaming"
    );

    // A sleep: the status and the call say when it is due, alike, to the second in UTC.
    browser.click("#message", None).await;
    browser.type_text("nap").await;
    browser.press("Enter", false).await;
    browser
        .wait_for(
            "the thread sleeping, in the status and on the call",
            "(() => { \
               const status = document.getElementById('thread-status').innerText; \
               const call = document.querySelector('#transcript > .sleep .call-state')?.innerText; \
               return /^sleeping until \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC$/.test(status) \
                 && call === status && status; \
             })()",
        )
        .await;
    // The panel of what would wake the thread names the sleep's timer, at the same time.
    browser
        .wait_for(
            "the waiting panel with the sleep's timer",
            "(() => { \
               const text = document.getElementById('waiting')?.innerText || ''; \
               const status = document.getElementById('thread-status').innerText; \
               return !document.getElementById('waiting-panel').hidden \
                 && text.includes('timer: sleep fires ' + status.replace('sleeping until ', '')); \
             })()",
        )
        .await;
    // New input cuts the sleep short: the call shows as interrupted. The record keeps the sleep
    // (its timer's result comes later, as an event), but nothing waits on it: the thread is
    // idle. (The list shows the record as the server sends it; the header and the tree show
    // the page's copy, which drops a call on its result.)
    browser.click("#message", None).await;
    browser.type_text("wake").await;
    browser.press("Enter", false).await;
    browser
        .wait_for(
            "the interrupted sleep, and the thread idle",
            "document.querySelector('#transcript > .sleep .call-state')?.innerText === 'interrupted' \
             && document.getElementById('transcript').innerText.includes('Awake now.') \
             && document.getElementById('thread-status').innerText === 'idle' \
             && document.querySelector('#tree .status').innerText === 'idle' \
             && document.querySelector('#thread-list .status').innerText === 'idle' \
             && document.getElementById('waiting').innerText.includes('the conversation went on without it')",
        )
        .await;
    browser.screenshot(&shots, "10-interrupted").await;

    // The server restarts: the stream reconnects, the transcript is rebuilt, nothing doubles.
    let before = entries(&browser).await;
    drop(server);
    browser
        .wait_for(
            "the page to notice the dropped stream",
            "document.getElementById('connection').textContent === 'reconnecting…'",
        )
        .await;
    let _server = start(dir.path(), &base).await;
    browser
        .wait_for(
            "the stream to come back",
            "document.getElementById('connection').textContent === 'live' \
             && document.getElementById('server-state').hidden",
        )
        .await;
    assert_eq!(
        entries(&browser).await,
        before,
        "the transcript after a reconnect"
    );
    // What the restart broke, as the browser logs it: the stream cut off, requests refused.
    browser.expect_problems("ERR_INCOMPLETE_CHUNKED_ENCODING");
    browser.expect_problems("ERR_CONNECTION_REFUSED");

    // A reload shows the same transcript from the history alone.
    browser.call("Page.reload", json!({})).await;
    browser
        .wait_for(
            "the reloaded conversation",
            "document.getElementById('connection')?.textContent === 'live' \
             && document.getElementById('transcript').innerText.includes('You picked blue.')",
        )
        .await;
    assert_eq!(
        entries(&browser).await,
        before,
        "the transcript after a reload"
    );
    assert_eq!(
        browser
            .eval("document.getElementById('thread-status').innerText")
            .await,
        "idle",
        "a thread that finished its turn is idle after a reload"
    );

    // An agent's Markdown is shown as markup; what could run or reach out is not there.
    browser.click("#message", None).await;
    browser.type_text("markdown").await;
    browser.press("Enter", false).await;
    browser
        .wait_for(
            "the rendered Markdown",
            "[...document.querySelectorAll('#transcript .text.markdown strong')]                .some((b) => b.innerText === 'Bold')              && document.querySelector('#transcript .text.markdown table td')?.innerText === '1'",
        )
        .await;
    let checks = browser
        .eval(
            "(() => { const t = document.getElementById('transcript');                const docs = [...t.querySelectorAll('a')].find((a) => a.innerText === 'the docs');                const bad = [...t.querySelectorAll('a, span')].find((a) => a.innerText === 'this');                return { xss: window.__xss === undefined,                         scripts: t.querySelectorAll('script').length,                         handlers: t.querySelectorAll('[onerror], [onclick], [onload]').length,                         docs: docs && docs.getAttribute('href'),                         rel: docs && docs.getAttribute('rel'),                         target: docs && docs.getAttribute('target'),                         bad_href: bad ? bad.getAttribute('href') : 'missing' }; })()",
        )
        .await;
    assert_eq!(
        checks,
        json!({"xss": true, "scripts": 0, "handlers": 0,
               "docs": "https://example.com/docs", "rel": "noopener noreferrer nofollow",
               "target": "_blank", "bad_href": null}),
    );
    browser.screenshot(&shots, "14-markdown").await;

    // The thread's model, switched from the header: the next answer comes from it.
    std::fs::write(
        dir.path().join("other.script.yaml"),
        "rules:\n  - reply: {text: \"another model here\"}\n",
    )
    .unwrap();
    // The field offers the models the server allows.
    browser
        .wait_for(
            "the allowed models offered",
            "[...document.querySelectorAll('#model-options option')].map((o) => o.value).join() \
             === 'script:other.script.yaml'",
        )
        .await;
    browser.click("#model-choice", None).await;
    browser.type_text("script:other.script.yaml").await;
    browser.press("Enter", false).await;
    browser
        .wait_for(
            "the switched model in the header",
            "document.getElementById('thread-model').innerText.includes('model script:other.script.yaml')",
        )
        .await;
    browser.click("#message", None).await;
    browser.type_text("which model answers?").await;
    browser.press("Enter", false).await;
    browser
        .wait_for(
            "the other model's answer",
            "document.getElementById('transcript').innerText.includes('another model here')",
        )
        .await;
    browser.screenshot(&shots, "09-model").await;

    // What the conversation cost: its completions priced, the other model's one unpriced (it
    // has no prices); then a person sets its budget from the panel.
    browser
        .wait_for(
            "the cost panel with the conversation's cost",
            "/^Conversation: \\d+ completions, \\d+ tokens, \\$\\d+\\.\\d+ \\+ 1 unpriced completion\\(s\\)$/m \
               .test(document.getElementById('cost')?.innerText || '') \
             && document.getElementById('cost').innerText.includes('No budget')",
        )
        .await;
    browser.click("#budget-usd", None).await;
    browser.type_text("25").await;
    browser.press("Enter", false).await;
    browser
        .wait_for(
            "the budget the person set",
            "document.getElementById('cost').innerText.includes('Budget: $25.00')",
        )
        .await;
    browser.screenshot(&shots, "11-cost").await;

    // Many conversations: the list shows a page of them, newest first, and more on request;
    // a search narrows it.
    let http = reqwest::Client::new();
    for n in 0..55 {
        let sent = http
            .post(format!("{base}/threads/bulk-{n:02}/messages"))
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({"text": "hi"}))
            .send()
            .await
            .unwrap();
        assert_eq!(sent.status(), 202);
    }
    let listed = "document.querySelectorAll('#thread-list li').length";
    browser
        .wait_for(
            "a page of conversations and a button for more",
            &format!("{listed} === 50 && !document.getElementById('more-threads').hidden"),
        )
        .await;
    browser.click("#more-threads", None).await;
    browser
        .wait_for(
            "every conversation",
            &format!(
                "{listed} > 55 && document.getElementById('more-threads').hidden                  && document.querySelector('#thread-list li').innerText.includes('bulk-54')"
            ),
        )
        .await;
    browser.click("#thread-search", None).await;
    browser.type_text("bulk-07").await;
    browser
        .wait_for(
            "the one conversation searched for",
            &format!(
                "{listed} === 1 && document.getElementById('thread-list').innerText.includes('bulk-07')"
            ),
        )
        .await;
    browser.screenshot(&shots, "13-search").await;

    // A narrow window: one column, nothing wider than the window.
    browser.resize(420, 900).await;
    browser
        .wait_for(
            "the narrow layout",
            "document.documentElement.scrollWidth <= window.innerWidth",
        )
        .await;
    browser.screenshot(&shots, "08-narrow").await;

    let problems = browser.problems();
    assert!(
        problems.is_empty(),
        "console errors and exceptions: {problems:#?}"
    );
}
