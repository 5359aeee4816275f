//! The renderer's output (what the sanitizer keeps and removes), its bounds, and the route
//! under hostile requests.

use super::*;

#[test]
fn markdown_is_kept_as_markup() {
    let html = to_html(
        "# Plan\n\n**bold** and *soft* and `code`\n\n- [x] done\n- [ ] next\n\n\
         | a | b |\n|---|---|\n| 1 | 2 |\n\n```\nfn main() {}\n```\n\n> quoted",
    );
    for kept in [
        "<h1>Plan</h1>",
        "<strong>bold</strong>",
        "<em>soft</em>",
        "<code>code</code>",
        "<table>",
        "<td>1</td>",
        "<pre><code>fn main() {}",
        "<blockquote>",
        "type=\"checkbox\"",
    ] {
        assert!(html.contains(kept), "{kept} missing from {html}");
    }
}

#[test]
fn links_open_elsewhere_and_only_with_safe_schemes() {
    let html = to_html("[docs](https://example.com/a?b=1) [mail](mailto:a@example.com)");
    assert!(
        html.contains("href=\"https://example.com/a?b=1\""),
        "{html}"
    );
    assert!(
        html.contains("rel=\"noopener noreferrer nofollow\""),
        "{html}"
    );
    assert!(html.contains("target=\"_blank\""), "{html}");
    assert!(html.contains("href=\"mailto:a@example.com\""), "{html}");
    for bad in [
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](  javascript:alert(1))",
        "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "[x](vbscript:msgbox(1))",
        "[x](/threads/t/close)",
        "<a href=\"javascript:alert(1)\">x</a>",
    ] {
        let html = to_html(bad);
        assert!(!html.contains("href"), "{bad} kept a link: {html}");
    }
}

#[test]
fn raw_html_that_could_run_or_reach_out_is_removed() {
    for (bad, gone) in [
        ("<script>alert(1)</script>", "<script"),
        ("<img src=x onerror=alert(1)>", "onerror"),
        ("<svg onload=alert(1)></svg>", "onload"),
        ("<iframe src=\"https://evil.example\"></iframe>", "<iframe"),
        ("<style>body{display:none}</style>", "<style"),
        (
            "<form action=\"https://evil.example\"><input></form>",
            "<form",
        ),
        ("<div style=\"position:fixed\">x</div>", "style="),
        ("<b onclick=\"alert(1)\">x</b>", "onclick"),
        ("<object data=\"x\"></object>", "<object"),
        (
            "<math><mi xlink:href=\"javascript:alert(1)\">x</mi></math>",
            "javascript",
        ),
    ] {
        let html = to_html(bad);
        assert!(!html.to_lowercase().contains(gone), "{bad}: {html}");
    }
    // Harmless raw HTML stays.
    assert!(to_html("<b>bold</b>").contains("<b>bold</b>"));
}

#[test]
fn images_show_inline_data_only_and_never_load_from_elsewhere() {
    let inline = to_html("![dot](data:image/png;base64,iVBORw0KGgo=)");
    assert!(
        inline.contains("src=\"data:image/png;base64,iVBORw0KGgo=\""),
        "{inline}"
    );
    let remote = to_html("![tracker](https://evil.example/pixel.png)");
    assert!(!remote.contains("src="), "{remote}");
    assert!(remote.contains("alt=\"tracker\""), "{remote}");
    let svg = to_html("![x](data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=)");
    assert!(!svg.contains("src="), "{svg}");
}

#[test]
fn urls_are_judged_as_a_browser_reads_them() {
    // A browser's URL parser drops leading and trailing control characters and spaces, and
    // ASCII tabs and newlines anywhere, before it reads the scheme.
    for bad in [
        "<a href=\"da&#x09;ta:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==\">x</a>",
        "<a href=\"&#x01;data:text/html,hi\">x</a>",
        "<a href=\"java&#x0A;script:alert(1)\">x</a>",
        "<a href=\"&#x20;&#x1F;javascript:alert(1)\">x</a>",
        "<a href=\"data:text/html,hi&#x00;\">x</a>",
        "<img src=\"da&#x0D;ta:image/svg+xml;base64,PHN2Zz48L3N2Zz4=\">",
        "<img src=\"&#x01;https://evil.example/pixel.png\">",
    ] {
        let html = to_html(bad);
        assert!(
            !html.contains("href=") && !html.contains("src="),
            "{bad} kept a URL: {html}"
        );
    }
    // Every attribute that holds a URL is judged, not only links' and images'.
    for bad in [
        "<blockquote cite=\"javascript:alert(1)\">q</blockquote>",
        "<q cite=\"data:text/html,hi\">q</q>",
        "<del cite=\"vbscript:x\">d</del>",
        "<ins cite=\"ja&#x09;vascript:alert(1)\">i</ins>",
        "<blockquote cite=\"/threads/t/close\">q</blockquote>",
    ] {
        let html = to_html(bad);
        assert!(!html.contains("cite="), "{bad} kept a URL: {html}");
    }
    // What is kept is what the browser will read.
    let html = to_html("<a href=\"https://exa&#x09;mple.com/a\">x</a>");
    assert!(html.contains("href=\"https://example.com/a\""), "{html}");
    let html = to_html("<blockquote cite=\"https://example.com/q\">q</blockquote>");
    assert!(html.contains("cite=\"https://example.com/q\""), "{html}");
    let html = to_html("<img src=\" data:image/png;base64,iVBORw0KGgo=\">");
    assert!(
        html.contains("src=\"data:image/png;base64,iVBORw0KGgo=\""),
        "{html}"
    );
}

/// Texts that nest as deep as their size lets them, each of about `chars` characters: Markdown
/// quotes and lists, raw HTML blocks, tables, and mis-nested tags.
fn hostile(chars: usize) -> Vec<(&'static str, String)> {
    [
        ("<div>", "<div>"),
        ("quotes", "> "),
        ("ordered lists", "1. "),
        ("<blockquote>", "<blockquote>"),
        ("tables", "<table><td>"),
        ("mis-nested", "<span><div></span>"),
        ("formatting", "<b><div></b>"),
    ]
    .into_iter()
    .map(|(name, unit)| (name, unit.repeat(chars / unit.len())))
    .collect()
}

#[test]
fn the_deepest_texts_render_in_a_fraction_of_a_second() {
    // Unbounded, each took minutes at this size (10 s for 64 kB of `> `, four times longer for
    // each doubling); bounded, each takes well under a second, even unoptimized.
    for (name, text) in hostile(MAX_TEXT_CHARS) {
        let started = std::time::Instant::now();
        let html = to_html(&text);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(5), "{name}: {took:?}");
        assert!(!html.is_empty(), "{name}");
    }
}

/// `texts` as a request's body.
fn body(texts: &[String]) -> String {
    serde_json::json!({ "texts": texts }).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_answers_while_the_heaviest_requests_render() {
    use crate::testing::{post_json, send_blocking, served, status_within, PATIENCE};
    let app = routes().route("/health", axum::routing::get(|| async { "ok" }));
    let address = served(app).await;
    // As many of the deepest texts as a body holds, four requests at once: more than the
    // threads that answer requests (two here).
    let texts: Vec<String> = hostile(MAX_TEXT_CHARS)
        .into_iter()
        .map(|(_, text)| text)
        .cycle()
        .take(9)
        .collect();
    let heavy = post_json(address, "/markdown", &body(&texts));
    let started = std::time::Instant::now();
    // Each on a thread of its own with blocking IO: the test tells even if the server's
    // threads are all stuck.
    let requests: Vec<_> = (0..4)
        .map(|_| {
            let heavy = heavy.clone();
            std::thread::spawn(move || send_blocking(address, &heavy, PATIENCE))
        })
        .collect();
    // The probe blocks this thread, not the server's: it tells even if those are all stuck
    // (a moment first for the last bytes to arrive; a probe before them would only be easier).
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        status_within(address, "/health", Duration::from_secs(2)),
        Some(200),
        "/health waited for the renderings"
    );
    for request in requests {
        let answer = request.join().unwrap().expect("answered");
        // Answered: rendered (200), or refused as busy past the time limit (503).
        assert!(matches!(answer.status, 200 | 503), "{answer:?}");
        assert!(answer.body.starts_with('{'), "{answer:?}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "{:?}",
        started.elapsed()
    );
}

/// The route's answer to `texts` (status, body), rendered by `renderer`.
async fn rendered_by(renderer: Renderer, texts: &[String]) -> (u16, String) {
    use tower::ServiceExt;
    let request = axum::http::Request::post("/markdown")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body(texts)))
        .unwrap();
    let answer = routes_with(renderer).oneshot(request).await.unwrap();
    let status = answer.status().as_u16();
    let bytes = axum::body::to_bytes(answer.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn a_request_over_a_bound_is_refused_naming_it() {
    let renderer = Renderer::default();
    let many = vec![String::from("a"); MAX_TEXTS + 1];
    let (status, body) = rendered_by(renderer.clone(), &many).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("at most 500"), "{body}");
    let long = vec!["ok".to_owned(), "a".repeat(MAX_TEXT_CHARS + 1)];
    let (status, body) = rendered_by(renderer.clone(), &long).await;
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("`texts[1]` has 100001 characters"), "{body}");
    // Characters, not bytes.
    let wide = vec!["é".repeat(MAX_TEXT_CHARS)];
    assert_eq!(rendered_by(renderer.clone(), &wide).await.0, 200);
    // The body as a whole.
    let big = vec!["a".repeat(MAX_TEXT_CHARS); MAX_BODY_BYTES / MAX_TEXT_CHARS + 1];
    let (status, body) = rendered_by(renderer, &big).await;
    assert_eq!(status, 413, "{body}");
    assert!(body.starts_with("{\"error\":"), "{body}");
}

#[tokio::test]
async fn a_rendering_past_its_time_limit_is_answered_503() {
    let renderer = Renderer::new(1, Duration::from_millis(1));
    let texts: Vec<String> = hostile(MAX_TEXT_CHARS)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    let (status, body) = rendered_by(renderer, &texts).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("not rendered within 0.001 s"), "{body}");
}

/// `count` texts slow to render for their size (many paragraphs) that one body holds, and how
/// long one takes here.
fn slow_texts(count: usize) -> (Vec<String>, Duration) {
    // Each paragraph is 3 characters, 5 bytes of JSON (`a\n\n`).
    let text = "a\n\n".repeat((MAX_BODY_BYTES / count - 16) / 5);
    let started = std::time::Instant::now();
    let _ = to_html(&text);
    (vec![text; count], started.elapsed())
}

/// Waits until `renderer` (of one turn) has `busy` requests rendering (their threads not yet
/// done); fails past [`PATIENCE`](crate::testing::PATIENCE).
async fn until_busy(renderer: &Renderer, busy: usize) -> Duration {
    let started = std::time::Instant::now();
    while 1 - renderer.turns.available_permits() != busy {
        let waited = started.elapsed();
        assert!(waited < crate::testing::PATIENCE, "never {busy} busy");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    started.elapsed()
}

#[tokio::test]
async fn a_rendering_stops_when_its_request_is_dropped() {
    let renderer = Renderer::new(1, Duration::from_secs(600));
    let (texts, one) = slow_texts(20);
    let request = tokio::spawn({
        let renderer = renderer.clone();
        async move { renderer.render(texts).await.map(|_| ()).map_err(|_| ()) }
    });
    until_busy(&renderer, 1).await;
    request.abort();
    let stopped = until_busy(&renderer, 0).await;
    // It finishes the text it is on (one), not the 19 after it.
    assert!(
        stopped < one * 5,
        "stopped after {stopped:?}; a text takes {one:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rendering_stops_when_its_client_leaves() {
    use crate::testing::{post_json, served};
    use tokio::io::AsyncWriteExt;
    let renderer = Renderer::new(1, Duration::from_secs(600));
    let address = served(routes_with(renderer.clone())).await;
    let (texts, one) = slow_texts(20);
    let mut client = tokio::net::TcpStream::connect(address).await.unwrap();
    client
        .write_all(&post_json(address, "/markdown", &body(&texts)))
        .await
        .unwrap();
    until_busy(&renderer, 1).await;
    drop(client);
    let stopped = until_busy(&renderer, 0).await;
    assert!(
        stopped < one * 5,
        "stopped after {stopped:?}; a text takes {one:?}"
    );
}
