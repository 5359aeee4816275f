//! An MCP `tools/call` result as the one RAP `tool_result` that answers the call.

use infinity_rap::wire::{ContentItem, ImageData};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// What the RAP `tool_result` of a call says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Plain text: the MCP text items, joined.
    Text(String),
    /// A leading text item (the MCP text items, joined) and the MCP images.
    Content(Vec<ContentItem>),
    /// An error result (`isError: true`): the MCP text items, joined.
    Error(String),
}

/// The answer to a call of the MCP tool `tool` that returned `result`.
///
/// RAP results carry text and images only: every other MCP content item (audio, resources,
/// resource links) becomes a short text placeholder naming its kind, in place. Without any
/// content item, structured content is sent as JSON text.
pub(crate) fn answer(tool: &str, result: CallToolResult) -> Answer {
    let mut texts = Vec::new();
    let mut images = Vec::new();
    for block in result.content {
        match block {
            ContentBlock::Text(text) => texts.push(text.text),
            ContentBlock::Image(image) => images.push(ImageData {
                data: image.data,
                media_type: image.mime_type,
            }),
            other => texts.push(placeholder(&other)),
        }
    }
    if texts.is_empty() && images.is_empty() {
        if let Some(structured) = result.structured_content {
            texts.push(structured.to_string());
        }
    }
    let text = texts.join("\n");
    if result.is_error == Some(true) {
        return Answer::Error(if text.trim().is_empty() {
            format!("the MCP tool `{tool}` failed without saying why")
        } else {
            text
        });
    }
    if images.is_empty() {
        return Answer::Text(if text.is_empty() {
            format!("The MCP tool `{tool}` returned no content.")
        } else {
            text
        });
    }
    let lead = if text.is_empty() {
        match images.len() {
            1 => format!("The MCP tool `{tool}` returned an image."),
            count => format!("The MCP tool `{tool}` returned {count} images."),
        }
    } else {
        text
    };
    let mut content = vec![ContentItem::Text { text: lead }];
    content.extend(images.into_iter().map(ContentItem::Image));
    Answer::Content(content)
}

/// The text that stands for a content item RAP cannot carry.
fn placeholder(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Audio(audio) => format!("[audio content ({}) omitted]", audio.mime_type),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, .. }
            | ResourceContents::BlobResourceContents { uri, .. } => {
                format!("[resource content {uri} omitted]")
            }
            _ => "[resource content omitted]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => format!("[resource link {} omitted]", link.uri),
        _ => "[MCP content of another kind omitted]".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn result(value: serde_json::Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn text_items_are_joined() {
        let answer = answer(
            "greet",
            result(json!({"content": [
                {"type": "text", "text": "hello"},
                {"type": "text", "text": "world"}
            ]})),
        );
        assert_eq!(answer, Answer::Text("hello\nworld".to_owned()));
    }

    #[test]
    fn images_come_after_one_leading_text_item() {
        let answer = answer(
            "picture",
            result(json!({"content": [
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                {"type": "text", "text": "A red pixel."}
            ]})),
        );
        assert_eq!(
            answer,
            Answer::Content(vec![
                ContentItem::Text {
                    text: "A red pixel.".to_owned()
                },
                ContentItem::Image(ImageData {
                    data: "iVBORw0KGgo=".to_owned(),
                    media_type: "image/png".to_owned()
                }),
            ])
        );
    }

    #[test]
    fn images_alone_get_a_leading_text_item() {
        let Answer::Content(content) = answer(
            "picture",
            result(json!({"content": [
                {"type": "image", "data": "AA==", "mimeType": "image/png"},
                {"type": "image", "data": "AQ==", "mimeType": "image/gif"}
            ]})),
        ) else {
            panic!("expected content");
        };
        assert_eq!(content.len(), 3);
        assert_eq!(
            content[0],
            ContentItem::Text {
                text: "The MCP tool `picture` returned 2 images.".to_owned()
            }
        );
    }

    #[test]
    fn other_content_kinds_become_placeholders_in_place() {
        let answer = answer(
            "mixed",
            result(json!({"content": [
                {"type": "text", "text": "before"},
                {"type": "audio", "data": "AA==", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "file:///notes.txt", "text": "notes"}},
                {"type": "resource_link", "uri": "file:///big.csv", "name": "big.csv"},
                {"type": "text", "text": "after"}
            ]})),
        );
        assert_eq!(
            answer,
            Answer::Text(
                "before\n[audio content (audio/wav) omitted]\n\
                 [resource content file:///notes.txt omitted]\n\
                 [resource link file:///big.csv omitted]\nafter"
                    .to_owned()
            )
        );
    }

    #[test]
    fn is_error_makes_an_error_answer() {
        let failed =
            result(json!({"content": [{"type": "text", "text": "boom"}], "isError": true}));
        assert_eq!(answer("fail", failed), Answer::Error("boom".to_owned()));
        let silent = result(json!({"content": [], "isError": true}));
        assert_eq!(
            answer("fail", silent),
            Answer::Error("the MCP tool `fail` failed without saying why".to_owned())
        );
    }

    #[test]
    fn structured_content_alone_is_sent_as_json() {
        let answer = answer("sum", result(json!({"structuredContent": {"sum": 5}})));
        assert_eq!(answer, Answer::Text(r#"{"sum":5}"#.to_owned()));
    }

    #[test]
    fn no_content_at_all_is_said() {
        let answer = answer("noop", result(json!({"content": []})));
        assert_eq!(
            answer,
            Answer::Text("The MCP tool `noop` returned no content.".to_owned())
        );
    }
}
