use super::*;
use infinity_agent_core::ids::ThreadId;

fn meta(assets: bool) -> ArtifactMeta {
    ArtifactMeta {
        id: "art-0123456789abcdef0123".into(),
        thread_id: ThreadId::new("t").unwrap(),
        title: "T".into(),
        format: Format::Html,
        visibility: Visibility::Unlisted,
        assets,
        files: Vec::new(),
        version: 1,
        created_at: jiff::Timestamp::UNIX_EPOCH,
        updated_at: jiff::Timestamp::UNIX_EPOCH,
    }
}

#[test]
fn a_page_loads_its_own_files_only_with_assets_and_nothing_else_ever() {
    let files = "http://h:1/a/art-0123456789abcdef0123/open/v1/files/";
    let without = content_policy(&meta(false), files, true);
    assert!(without.starts_with("sandbox allow-scripts;"), "{without}");
    assert!(
        without.contains("connect-src 'none'") && !without.contains(files),
        "{without}"
    );
    let with = content_policy(&meta(true), files, true);
    for directive in ["script-src", "style-src", "img-src", "connect-src"] {
        assert!(with.contains(directive), "{with}");
    }
    assert_eq!(with.matches(files).count(), 6, "{with}");
    assert!(!with.contains('*') && !with.contains("http:;"), "{with}");
}

#[test]
fn content_runs_scripts_only_in_a_frame_of_this_server() {
    let files = "http://h:1/a/art-0123456789abcdef0123/open/v1/files/";
    let framed = content_policy(&meta(true), files, true);
    assert!(framed.ends_with("frame-ancestors 'self'"), "{framed}");
    let inert = content_policy(&meta(true), files, false);
    assert!(
        inert.starts_with("sandbox;") && !inert.contains("allow-scripts"),
        "{inert}"
    );
    let load = |dest: Option<&'static str>| {
        let mut headers = HeaderMap::new();
        if let Some(dest) = dest {
            headers.insert("sec-fetch-dest", HeaderValue::from_static(dest));
        }
        Load::of(&headers)
    };
    assert_eq!(load(Some("iframe")), Load::Frame);
    assert_eq!(load(Some("Frame")), Load::Frame);
    assert_eq!(load(Some("document")), Load::TopLevel);
    for other in ["empty", "object", "embed", "script", "image"] {
        assert_eq!(load(Some(other)), Load::Other, "{other}");
    }
    assert_eq!(load(None), Load::Unsaid);
    assert_eq!(query_value("a b&c\"<"), "a%20b%26c%22%3C");
}

#[test]
fn a_policy_that_cannot_be_a_header_falls_back_to_the_strictest() {
    let response = served("x", HTML, "bad\npolicy");
    assert_eq!(
        response.headers()[header::CONTENT_SECURITY_POLICY],
        "sandbox; default-src 'none'"
    );
    let mut headers = HeaderMap::new();
    headers.insert("host", HeaderValue::from_static("evil;script-src *"));
    assert_eq!(origin(&headers), "http://localhost");
}

#[test]
fn pages_escape_what_agents_and_people_wrote() {
    let hostile = r#"<script>alert(1)</script>" onload="x" '&"#;
    let comment = Comment {
        id: "cm-000000000001".into(),
        author: hostile.into(),
        text: format!("text {hostile}"),
        version: 1,
        at: jiff::Timestamp::UNIX_EPOCH,
        answers: vec![infinity_library::artifact::Answer {
            id: "a1".into(),
            text: format!("answer {hostile}"),
            at: jiff::Timestamp::UNIX_EPOCH,
        }],
    };
    let frame = FramePage {
        id: "art-0123456789abcdef0123",
        title: hostile,
        visibility: "private",
        version: 2,
        newest: 3,
        access_token: Some(query_value("t&k\"<")),
        key: "k".into(),
        comments: std::slice::from_ref(&comment),
        author_max: 80,
        text_max: 4000,
    }
    .render()
    .unwrap();
    let Ok(markdown) = markdown(hostile, "# Hi\n\n<img src=x onerror=alert(1)>") else {
        panic!("the Markdown page did not render")
    };
    let index = IndexPage {
        pages: vec![&ArtifactMeta {
            title: hostile.into(),
            ..meta(false)
        }],
    }
    .render()
    .unwrap();
    for html in [&frame, &markdown, &index] {
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(!html.contains(r#"" onload"#), "{html}");
        assert!(
            html.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
            "{html}"
        );
    }
    // Every version but the shown one is a link carrying the private page's token, encoded.
    assert!(frame.contains("<strong>v2</strong>"), "{frame}");
    assert!(
        frame.contains(r#"href="/a/art-0123456789abcdef0123?v=3&amp;access_token=t%26k%22%3C""#),
        "{frame}"
    );
    assert!(frame.contains("answer &#60;script&#62;"), "{frame}");
    assert!(
        markdown.contains("<h1>Hi</h1>") && markdown.contains("&lt;img src=x"),
        "{markdown}"
    );
    assert!(index.contains("version 1, 1970-01-01 00:00 UTC"), "{index}");
}
