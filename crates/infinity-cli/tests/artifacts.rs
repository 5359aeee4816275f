//! Pages agents publish (the `artifact` category), served by a real `infinity serve` with a
//! token and a store folder: publishing, the sandboxed content and its files, comments reaching
//! the thread and its answers showing under them, a new version at the same URL turned private,
//! and a person commenting in a real browser.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod browser;
mod common;

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use common::{until, Server};

const TOKEN: &str = "pagetoken";

const SCRIPT: &str = r##"
rules:
  - when: "^publish$"
    reply:
      tool_calls:
        - name: artifact_publish
          args:
            title: "Garden report"
            content: "<h1>Tomatoes</h1><img alt='dot' src='files/dot.svg'>"
            assets: true
            files: {"dot.svg": "<svg xmlns='http://www.w3.org/2000/svg' width='40' height='40'><circle cx='20' cy='20' r='18' fill='green'/></svg>"}
  - when: "^update (art-[0-9a-f]+)$"
    reply:
      tool_calls:
        - name: artifact_update
          args: {id: "$1", content: "<h1>Tomatoes, v2</h1>", visibility: private, assets: false}
  - when: "^notes$"
    reply:
      tool_calls:
        - name: artifact_publish
          args: {title: "Notes", format: markdown, content: "# Notes\n\n*done* <script>alert(1)</script>"}
  - when: "^\\[artifact\\] .*\\((art-[0-9a-f]+), comment (cm-[0-9a-f]+)\\): ([\\s\\S]*)$"
    reply:
      tool_calls:
        - name: artifact_reply
          args: {id: "$1", comment_id: "$2", text: "Thanks: $3"}
  - reply: {text: "done"}
"##;

async fn serve(dir: &Path) -> (Server, String) {
    std::fs::write(dir.join("script.yaml"), SCRIPT).unwrap();
    std::fs::write(
        dir.join("agent.yaml"),
        "name: publisher\nmodel: script:script.yaml\ninternal_tools: {artifact: true}\n",
    )
    .unwrap();
    let agent = dir.join("agent.yaml").to_string_lossy().into_owned();
    let store = dir.join("store").to_string_lossy().into_owned();
    let token = [("INFINITY_SERVE_TOKEN".to_owned(), TOKEN.to_owned())];
    common::serve_with(dir, &["--agent", &agent, "--store", &store], &token).await
}

fn http() -> reqwest::Client {
    reqwest::Client::new()
}

async fn say(base: &str, thread: &str, text: &str) {
    let r = http()
        .post(format!("{base}/threads/{thread}/messages"))
        .bearer_auth(TOKEN)
        .json(&json!({ "text": text }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
}

async fn record(base: &str, thread: &str) -> Value {
    http()
        .get(format!("{base}/threads/{thread}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap_or(Value::Null)
}

/// The thread's pages, once it has `n`.
async fn pages(base: &str, thread: &str, n: usize) -> Vec<Value> {
    let mut found = Vec::new();
    for _ in 0..150 {
        let r = record(base, thread).await;
        if let Some(list) = r["artifacts"].as_array().filter(|l| l.len() >= n) {
            found = list.clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(found.len() >= n, "the thread has no {n} page(s)");
    found
}

async fn get(url: &str) -> reqwest::Response {
    http().get(url).send().await.unwrap()
}

fn header(r: &reqwest::Response, name: &str) -> String {
    r.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_publishes_a_page_people_comment_and_it_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, base) = serve(dir.path()).await;
    say(&base, "garden", "publish").await;
    let page = pages(&base, "garden", 1).await.remove(0);
    let id = page["id"].as_str().unwrap().to_owned();
    assert_eq!(page["url"], format!("{base}/a/{id}"));
    until("the page to be stored", || async {
        get(&format!("{base}/a/{id}")).await.status() == 200
    })
    .await;

    // The frame: our page, our policy, the content in a sandboxed frame; no token needed.
    let frame = get(&format!("{base}/a/{id}")).await;
    assert!(header(&frame, "content-security-policy").contains("script-src 'self'"));
    let html = frame.text().await.unwrap();
    assert!(html.contains("<title>Garden report</title>"), "{html}");
    let src = format!("/a/{id}/open/v1/page");
    assert!(
        html.contains(&format!(r#"sandbox="allow-scripts" src="{src}""#)),
        "{html}"
    );

    // The content: sandboxed, its own files allowed, nothing else.
    let content = get(&format!("{base}{src}")).await;
    let policy = header(&content, "content-security-policy");
    assert!(policy.starts_with("sandbox allow-scripts;"), "{policy}");
    assert!(
        policy.contains(&format!("img-src data: {base}/a/{id}/open/v1/files/")),
        "{policy}"
    );
    assert!(content.text().await.unwrap().contains("<h1>Tomatoes</h1>"));
    let file = get(&format!("{base}/a/{id}/open/v1/files/dot.svg")).await;
    assert_eq!(header(&file, "content-type"), "image/svg+xml");
    assert_eq!(
        get(&format!("{base}/a/{id}/open/v1/files/nope.svg"))
            .await
            .status(),
        404
    );
    assert_eq!(
        get(&format!("{base}/a/{id}/open/v9/page")).await.status(),
        404
    );

    // A comment reaches the thread, which answers it under the comment.
    let posted = http()
        .post(format!("{base}/a/{id}/comments"))
        .json(&json!({"text": "more basil", "author": "Ann"}))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 201);
    until("the answer under the comment", || async {
        let comments: Value = get(&format!("{base}/a/{id}/comments"))
            .await
            .json()
            .await
            .unwrap();
        comments[0]["answers"][0]["text"] == "Thanks: more basil"
    })
    .await;
    let comments: Value = get(&format!("{base}/a/{id}/comments"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(comments[0]["author"], "Ann");
    assert!(get(&format!("{base}/a/{id}"))
        .await
        .text()
        .await
        .unwrap()
        .contains("Thanks: more basil"));
    // Bad comments are refused, naming why.
    for (body, says) in [
        (json!({"text": "  "}), "`text` must have"),
        (json!({"text": "x", "author": "a".repeat(81)}), "`author`"),
        (json!({"txt": "x"}), "the body must be"),
    ] {
        let r = http()
            .post(format!("{base}/a/{id}/comments"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400);
        assert!(r.text().await.unwrap().contains(says));
    }
    assert_eq!(
        get(&format!("{base}/a/art-00000000000000000000"))
            .await
            .status(),
        404
    );
    assert_eq!(get(&format!("{base}/a/..%2Fstore")).await.status(), 404);

    // A new version at the same URL, now private: without the token it is not there; with it,
    // the frame loads through the page's own key, and the old version stays.
    say(&base, "garden", &format!("update {id}")).await;
    until("version 2", || async {
        record(&base, "garden").await["artifacts"][0]["version"] == 2
    })
    .await;
    until("the private page to be stored", || async {
        get(&format!("{base}/a/{id}")).await.status() == 404
    })
    .await;
    assert_eq!(get(&format!("{base}/a/{id}/comments")).await.status(), 404);
    let framed = get(&format!("{base}/a/{id}?access_token={TOKEN}")).await;
    assert_eq!(framed.status(), 200);
    let html = framed.text().await.unwrap();
    let key = html
        .split(&format!("/a/{id}/"))
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap()
        .to_owned();
    assert_ne!(key, "open");
    assert_eq!(
        get(&format!("{base}/a/{id}/open/v2/page")).await.status(),
        404
    );
    let v2 = get(&format!("{base}/a/{id}/{key}/v2/page"))
        .await
        .text()
        .await
        .unwrap();
    assert!(v2.contains("Tomatoes, v2"), "{v2}");
    let v1 = get(&format!("{base}/a/{id}/{key}/v1/page"))
        .await
        .text()
        .await
        .unwrap();
    assert!(v1.contains("<h1>Tomatoes</h1>"), "{v1}");
    // Without assets now, the page loads no files.
    let v2 = get(&format!("{base}/a/{id}/{key}/v2/page")).await;
    assert!(!header(&v2, "content-security-policy").contains("/files/"));

    // Markdown: rendered, its raw HTML shown as text; listed when public (it is unlisted).
    say(&base, "garden", "notes").await;
    let notes = pages(&base, "garden", 2).await.remove(1);
    let notes_id = notes["id"].as_str().unwrap().to_owned();
    until("the notes", || async {
        get(&format!("{base}/a/{notes_id}")).await.status() == 200
    })
    .await;
    let shown = get(&format!("{base}/a/{notes_id}/open/v1/page"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        shown.contains("<h1>Notes</h1>") && shown.contains("<em>done</em>"),
        "{shown}"
    );
    assert!(
        shown.contains("&lt;script&gt;") && !shown.contains("<script>"),
        "{shown}"
    );
    let index = get(&format!("{base}/a")).await.text().await.unwrap();
    assert!(index.contains("No public pages yet"), "{index}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_reads_a_page_and_comments_in_a_real_browser() {
    let Some(chromium) = browser::chromium_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_server, base) = serve(dir.path()).await;
    say(&base, "garden", "publish").await;
    let id = pages(&base, "garden", 1).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    until("the page to be stored", || async {
        get(&format!("{base}/a/{id}")).await.status() == 200
    })
    .await;
    let browser = browser::Browser::launch(&chromium, 1100, 900).await;
    browser.open(&format!("{base}/a/{id}")).await;
    browser
        .wait_for("the form", "!!document.getElementById('comment-form')")
        .await;
    // The page's content is in its frame, in an origin of its own (the frame's document cannot
    // be read from here).
    browser
        .wait_for(
            "the sandboxed frame",
            "(() => { const f = document.getElementById('page'); \
               try { return f.contentDocument === null; } catch (e) { return true; } })()",
        )
        .await;
    // (Focused from script: the frame above it is still laying out.)
    browser
        .eval("document.getElementById('author').focus(); true")
        .await;
    browser.type_text("Ann").await;
    browser.click("#text", None).await;
    browser.type_text("more basil").await;
    browser.click("#comment-form button", None).await;
    browser
        .wait_for(
            "the comment on the page",
            "document.querySelector('li.comment') \
             && document.querySelector('li.comment').innerText.includes('more basil') \
             && document.querySelector('li.comment .who').innerText.startsWith('Ann')",
        )
        .await;
    // The thread answers; a reload shows the answer under it.
    until("the answer", || async {
        let comments: Value = get(&format!("{base}/a/{id}/comments"))
            .await
            .json()
            .await
            .unwrap();
        comments[0]["answers"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    })
    .await;
    browser.open(&format!("{base}/a/{id}")).await;
    browser
        .wait_for(
            "the answer under the comment",
            "document.querySelector('li.answer') \
             && document.querySelector('li.answer').innerText.includes('Thanks: more basil')",
        )
        .await;
    browser
        .screenshot(&browser::screenshot_dir(), "11-artifact")
        .await;
    let problems = browser.problems();
    assert!(problems.is_empty(), "console problems: {problems:#?}");
}
