//! Pages agents publish (the `artifact` category), served by a real `infinity serve` with a
//! token and a store folder: publishing, the sandboxed content and its files, comments reaching
//! the thread and its answers showing under them, a new version at the same URL turned private,
//! and a person commenting in a real browser.

use crate::browser;
use crate::common;

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use common::{until, Server};
use infinity_test_support::Api;

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
  - when: "^app$"
    reply:
      tool_calls:
        - name: artifact_publish
          args:
            title: "Fruit"
            assets: true
            files: {"data.json": "{\"fruit\": \"fig\"}"}
            content: |
              <p id="out">waiting</p>
              <script>
                // What a page must not do: as a tab's top document, take the tab elsewhere.
                if (window.top === window) location.replace("about:blank#escaped");
                const say = (what) => setInterval(() => parent.postMessage(what, "*"), 100);
                fetch("files/data.json")
                  .then((r) => r.json())
                  .then((d) => say("fetched " + d.fruit), (e) => say("failed " + e));
              </script>
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

/// The API at `base`, with the token.
fn api(base: &str) -> Api {
    Api::new(base, Some(TOKEN))
}

/// The thread's pages, once it has `n`.
async fn pages(base: &str, thread: &str, n: usize) -> Vec<Value> {
    let mut found = Vec::new();
    for _ in 0..150 {
        let r = api(base).record(thread).await;
        if let Some(list) = r["category_notes"]["artifact"]
            .as_array()
            .filter(|l| l.len() >= n)
        {
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

/// The page number `nth` (from 1) the thread has, once it is stored: its id.
async fn stored_page(base: &str, thread: &str, nth: usize) -> String {
    let id = pages(base, thread, nth).await[nth - 1]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    until("the page to be stored", || async {
        get(&format!("{base}/a/{id}")).await.status() == 200
    })
    .await;
    id
}

/// A GET as a browser makes it for a load of `dest` (`Sec-Fetch-Dest`), redirects not followed.
async fn get_as(url: &str, dest: &str) -> reqwest::Response {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(url)
        .header("sec-fetch-dest", dest)
        .send()
        .await
        .unwrap()
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
    api(&base).say("garden", "publish").await;
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

    // The content, loaded into a frame: sandboxed, its own files allowed, nothing else, and
    // framed by this server's pages only.
    let content = get_as(&format!("{base}{src}"), "iframe").await;
    let policy = header(&content, "content-security-policy");
    assert!(policy.starts_with("sandbox allow-scripts;"), "{policy}");
    assert!(policy.contains("frame-ancestors 'self'"), "{policy}");
    assert!(
        policy.contains(&format!("img-src data: {base}/a/{id}/open/v1/files/")),
        "{policy}"
    );
    assert_eq!(header(&content, "vary"), "sec-fetch-dest");
    assert!(content.text().await.unwrap().contains("<h1>Tomatoes</h1>"));
    // As a tab's top document it is not served (the tab goes to the frame page); other loads
    // are refused; a client that says nothing gets it without scripts.
    let top = get_as(&format!("{base}{src}"), "document").await;
    assert_eq!(top.status(), 303);
    assert_eq!(header(&top, "location"), format!("/a/{id}?v=1"));
    assert!(!top.text().await.unwrap().contains("Tomatoes"));
    for dest in ["empty", "object", "embed", "script"] {
        let other = get_as(&format!("{base}{src}"), dest).await;
        assert_eq!(other.status(), 403, "{dest}");
        assert!(!other.text().await.unwrap().contains("Tomatoes"), "{dest}");
    }
    let unsaid = get(&format!("{base}{src}")).await;
    let policy = header(&unsaid, "content-security-policy");
    assert!(
        policy.starts_with("sandbox;") && !policy.contains("allow-scripts"),
        "{policy}"
    );
    // The page's files: readable by its own `fetch()` (its sandboxed origin is `null`); the
    // content and the frame page send no CORS headers.
    let file = get_as(&format!("{base}/a/{id}/open/v1/files/dot.svg"), "empty").await;
    assert_eq!(header(&file, "content-type"), "image/svg+xml");
    assert_eq!(header(&file, "access-control-allow-origin"), "*");
    assert_eq!(header(&file, "access-control-allow-credentials"), "");
    let framed_again = get_as(&format!("{base}{src}"), "iframe").await;
    assert_eq!(header(&framed_again, "access-control-allow-origin"), "");
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
    for (body, status, says) in [
        (json!({"text": "  "}), 400, "`text` must have"),
        (
            json!({"text": "x", "author": "a".repeat(81)}),
            400,
            "`author`",
        ),
        (json!({"txt": "x"}), 422, "unknown field `txt`"),
    ] {
        let r = http()
            .post(format!("{base}/a/{id}/comments"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), status, "{body}");
        assert!(r.text().await.unwrap().contains(says), "{body}");
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
    api(&base).say("garden", &format!("update {id}")).await;
    until("version 2", || async {
        api(&base).record("garden").await["category_notes"]["artifact"][0]["version"] == 2
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
    // Its version links keep the access: v1 opens from v2's page.
    let link = format!("/a/{id}?v=1&amp;access_token={TOKEN}");
    assert!(html.contains(&link), "{html}");
    let old = get(&format!("{base}{}", link.replace("&amp;", "&"))).await;
    assert_eq!(old.status(), 200);
    let old = old.text().await.unwrap();
    assert!(
        old.contains(&format!(r#"src="/a/{id}/{key}/v1/page""#))
            && old.contains(&format!("/a/{id}?v=2&amp;access_token={TOKEN}")),
        "{old}"
    );
    // Without assets now, the page loads no files.
    let v2 = get(&format!("{base}/a/{id}/{key}/v2/page")).await;
    assert!(!header(&v2, "content-security-policy").contains("/files/"));

    // Markdown: rendered, its raw HTML shown as text; listed when public (it is unlisted).
    api(&base).say("garden", "notes").await;
    let notes_id = stored_page(&base, "garden", 2).await;
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
    api(&base).say("garden", "publish").await;
    let id = stored_page(&base, "garden", 1).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_runs_only_in_its_frame_and_fetches_its_own_files_in_a_real_browser() {
    let Some(chromium) = browser::chromium_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_server, base) = serve(dir.path()).await;
    api(&base).say("fruit", "app").await;
    let id = stored_page(&base, "fruit", 1).await;
    let browser = browser::Browser::launch(&chromium, 1000, 800).await;
    // The content's URL opened in the tab: its script does not run there (it would take the
    // tab to about:blank); the tab shows the frame page, where it runs in its frame.
    browser.open(&format!("{base}/a/{id}/open/v1/page")).await;
    browser
        .wait_for(
            "the frame page",
            "location.href.startsWith('http') && !!document.getElementById('page')",
        )
        .await;
    assert_eq!(
        browser.eval("location.pathname + location.search").await,
        format!("/a/{id}?v=1")
    );
    // In the frame, the page's script runs and reads its own file with fetch().
    browser
        .eval(
            "window.said = window.said || []; \
             window.addEventListener('message', (e) => window.said.push(String(e.data))); true",
        )
        .await;
    let said = browser
        .wait_for(
            "the page's word from its frame",
            "window.said.length > 0 && window.said[window.said.length - 1]",
        )
        .await;
    assert_eq!(said, "fetched fig");
    assert_eq!(
        browser.eval("location.pathname").await,
        format!("/a/{id}"),
        "the frame did not take the tab elsewhere"
    );
    let problems = browser.problems();
    assert!(problems.is_empty(), "console problems: {problems:#?}");
}
