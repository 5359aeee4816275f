//! The pieces of a `tool_result`: multimodal `content` items for the model and `display_as`
//! segments for people.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// One item of a `tool_result`'s `content`, tagged by `type`.
///
/// The spec defines exactly these two item types; any other is rejected, because the runtime
/// builds the model's input from them and could not know what to do with a third.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ContentItem {
    /// `{"type": "text", "text": ...}`: plain text.
    Text {
        /// The text.
        text: String,
    },
    /// `{"type": "image", "data": ..., "mediaType": ...}`. A runtime whose model takes no images
    /// replaces it with a text placeholder.
    Image(ImageData),
}

/// An image, inline: the fields of an `image` content item and the `content` of an `image`
/// display segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageData {
    /// The image bytes, base64-encoded.
    pub data: String,
    /// The MIME type, e.g. `image/png`.
    #[serde(rename = "mediaType")]
    pub media_type: String,
}

/// The `content` of a `diff` display segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffContent {
    /// The file the diff applies to.
    pub path: String,
    /// A unified diff (`---`, `+++`, `@@` lines).
    pub patch: String,
}

/// One entry of a `tool_result`'s `display_as`: `{"type": ..., "content": ...}`.
///
/// Display segments only change what people see. A runtime renders the first segment whose type
/// it supports and skips the others, so a segment type this crate does not know is kept as
/// [`DisplaySegment::Unknown`] rather than rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DisplaySegment {
    /// `text`: a short plain-text summary.
    Text(String),
    /// `diff`: a unified diff of one file.
    Diff(DiffContent),
    /// `image`: an inline image for clients that can show one.
    Image(ImageData),
    /// A segment of another type: the whole segment object, kept as received.
    Unknown(Value),
}

impl DisplaySegment {
    /// The segment's `type`.
    pub fn type_name(&self) -> &str {
        match self {
            DisplaySegment::Text(_) => "text",
            DisplaySegment::Diff(_) => "diff",
            DisplaySegment::Image(_) => "image",
            DisplaySegment::Unknown(raw) => raw.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }
}

/// The segment types the spec defines, in their wire form (adjacently tagged).
#[derive(Deserialize)]
#[serde(tag = "type", content = "content", rename_all = "lowercase")]
enum KnownSegment {
    Text(String),
    Diff(DiffContent),
    Image(ImageData),
}

/// [`KnownSegment`] by reference, for serializing without cloning.
#[derive(Serialize)]
#[serde(tag = "type", content = "content", rename_all = "lowercase")]
enum KnownSegmentRef<'a> {
    Text(&'a str),
    Diff(&'a DiffContent),
    Image(&'a ImageData),
}

impl Serialize for DisplaySegment {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            DisplaySegment::Text(text) => KnownSegmentRef::Text(text).serialize(serializer),
            DisplaySegment::Diff(diff) => KnownSegmentRef::Diff(diff).serialize(serializer),
            DisplaySegment::Image(image) => KnownSegmentRef::Image(image).serialize(serializer),
            DisplaySegment::Unknown(raw) => raw.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for DisplaySegment {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Value::deserialize(deserializer)?;
        match raw.get("type").and_then(Value::as_str) {
            Some("text" | "diff" | "image") => {
                let known = KnownSegment::deserialize(raw)
                    .map_err(|e| D::Error::custom(format!("display_as segment: {e}")))?;
                Ok(match known {
                    KnownSegment::Text(text) => DisplaySegment::Text(text),
                    KnownSegment::Diff(diff) => DisplaySegment::Diff(diff),
                    KnownSegment::Image(image) => DisplaySegment::Image(image),
                })
            }
            Some(_) => Ok(DisplaySegment::Unknown(raw)),
            None => Err(D::Error::custom(
                "display_as segment must be an object with a string field `type`",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_segment_types_are_kept_as_received() {
        let raw = json!({"type": "chart", "content": {"series": [1, 2]}, "title": "load"});
        let segment: DisplaySegment = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(segment, DisplaySegment::Unknown(raw.clone()));
        assert_eq!(segment.type_name(), "chart");
        assert_eq!(serde_json::to_value(&segment).unwrap(), raw);
    }

    #[test]
    fn a_known_segment_with_the_wrong_content_is_an_error() {
        let error =
            serde_json::from_value::<DisplaySegment>(json!({"type": "diff", "content": "x"}))
                .unwrap_err();
        assert!(error.to_string().contains("display_as segment"), "{error}");
    }

    #[test]
    fn a_segment_without_a_type_is_an_error() {
        let error = serde_json::from_value::<DisplaySegment>(json!({"content": "x"})).unwrap_err();
        assert!(error.to_string().contains("`type`"), "{error}");
    }
}
