//! Shows a tool result the way its tool asks people to see it (RAP `display_as`): the first
//! segment the terminal can show, best first. `text` is shown on one line, `diff` as the patch
//! under its path, `image` saved to a file whose path is shown; a segment of another type is
//! skipped. `None` when no segment can be shown (the result's text is shown instead).

use std::path::PathBuf;

use base64::Engine as _;
use infinity_agent_core::ids::{CallId, ThreadId};
use serde_json::Value;

/// The most patch lines shown.
const MAX_DIFF_LINES: usize = 200;

/// The segments rendered for the terminal; `pad` indents continuation lines.
pub fn render(thread: &ThreadId, call: &CallId, segments: &[Value], pad: usize) -> Option<String> {
    segments.iter().find_map(|segment| {
        let content = segment.get("content")?;
        match segment.get("type")?.as_str()? {
            "text" => Some(super::render::one_line(content.as_str()?, 160)),
            "diff" => Some(diff(
                content.get("path")?.as_str()?,
                content.get("patch")?.as_str()?,
                pad,
            )),
            "image" => image(
                thread,
                call,
                content.get("mediaType")?.as_str()?,
                content.get("data")?.as_str()?,
            ),
            _ => None,
        }
    })
}

fn diff(path: &str, patch: &str, pad: usize) -> String {
    let pad = " ".repeat(pad);
    let lines: Vec<&str> = patch.lines().collect();
    let mut shown = format!("diff of {path}");
    for line in lines.iter().take(MAX_DIFF_LINES) {
        shown.push('\n');
        shown.push_str(&pad);
        shown.push_str(line);
    }
    if lines.len() > MAX_DIFF_LINES {
        shown.push_str(&format!(
            "\n{pad}… {} more lines",
            lines.len() - MAX_DIFF_LINES
        ));
    }
    shown
}

/// Saves the image under the temporary directory (`infinity-images/THREAD-CALL.EXT`) and says
/// where; `None` when it cannot be decoded or written.
fn image(thread: &ThreadId, call: &CallId, media_type: &str, data: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()?;
    let extension = match media_type {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        _ => "img",
    };
    let folder: PathBuf = std::env::temp_dir().join("infinity-images");
    std::fs::create_dir_all(&folder).ok()?;
    let path = folder.join(format!("{thread}-{call}.{extension}"));
    std::fs::write(&path, &bytes).ok()?;
    Some(format!(
        "image ({media_type}, {} bytes) saved to {}",
        bytes.len(),
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ids() -> (ThreadId, CallId) {
        (
            ThreadId::new("t-display").unwrap(),
            CallId::new("c1").unwrap(),
        )
    }

    #[test]
    fn the_first_segment_the_terminal_can_show_wins() {
        let (thread, call) = ids();
        let segments = [
            json!({"type": "chart", "content": {"points": [1, 2]}}),
            json!({"type": "diff", "content": {"path": "src/main.rs",
                   "patch": "--- a\n+++ b\n@@ -1 +1 @@\n-old\n+new"}}),
            json!({"type": "text", "content": "edited src/main.rs"}),
        ];
        let shown = render(&thread, &call, &segments, 4).unwrap();
        assert_eq!(
            shown,
            "diff of src/main.rs\n    --- a\n    +++ b\n    @@ -1 +1 @@\n    -old\n    +new"
        );
        assert_eq!(
            render(&thread, &call, &segments[2..], 0).unwrap(),
            "edited src/main.rs"
        );
        // Nothing showable: the caller shows the text.
        assert_eq!(render(&thread, &call, &segments[..1], 0), None);
        assert_eq!(render(&thread, &call, &[json!({"type": "text"})], 0), None);
    }

    #[test]
    fn an_image_is_saved_and_its_path_shown() {
        let (thread, call) = ids();
        let png = [0x89u8, b'P', b'N', b'G', 1, 2, 3];
        let data = base64::engine::general_purpose::STANDARD.encode(png);
        let segments = [
            json!({"type": "image", "content": {"data": data, "mediaType": "image/png"}}),
            json!({"type": "text", "content": "a chart"}),
        ];
        let shown = render(&thread, &call, &segments, 0).unwrap();
        let path = shown.rsplit("saved to ").next().unwrap();
        assert!(shown.starts_with("image (image/png, 7 bytes)"), "{shown}");
        assert_eq!(std::fs::read(path).unwrap(), png);
        // Data that is not base64 falls through to the next segment.
        let broken = [
            json!({"type": "image", "content": {"data": "%%%", "mediaType": "image/png"}}),
            json!({"type": "text", "content": "a chart"}),
        ];
        assert_eq!(render(&thread, &call, &broken, 0).unwrap(), "a chart");
    }
}
