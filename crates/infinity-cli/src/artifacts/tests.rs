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
