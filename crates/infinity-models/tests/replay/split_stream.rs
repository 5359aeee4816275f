//! The body arrives in many small pieces, cut inside `data:` prefixes, between `\r` and `\n`,
//! inside JSON and inside multi-byte characters: the result is the same as read in one piece.

use std::time::Duration;

use infinity_agent_core::model::Completion;

use crate::replay::fixtures::{anthropic, complete, openai, quick_retries, Conversation};
use crate::replay::recordings::{
    ANTHROPIC_TEXT, ANTHROPIC_TOOL_CALLS, OPENAI_TEXT, OPENAI_TOOL_CALLS, TEXT,
};
use crate::replay::server::{awkward_pieces, Reply, Server};

/// Between pieces, so that each reaches the client on its own.
const PAUSE: Duration = Duration::from_millis(1);

/// One completion read from `reply`, without retries (a retry would hide a parsing failure).
async fn read_anthropic(reply: Reply) -> Completion {
    let server = Server::start(vec![reply]).await;
    let model = anthropic(&server, quick_retries(0));
    complete(&model, &Conversation::hello()).await.unwrap()
}

async fn read_openai(reply: Reply) -> Completion {
    let server = Server::start(vec![reply]).await;
    let model = openai(&server, quick_retries(0));
    complete(&model, &Conversation::hello()).await.unwrap()
}

fn tool_names(completion: &Completion) -> Vec<&str> {
    completion
        .tool_calls
        .iter()
        .map(|c| c.name.as_str())
        .collect()
}

#[test]
fn awkward_pieces_cut_where_promised() {
    let body = "data: {\"text\":\"°\"}\r\n\r\ndata: [DONE]\r\n\r\n";
    let pieces = awkward_pieces(body);
    assert_eq!(pieces.concat(), body.as_bytes());
    assert!(pieces.iter().any(|p| p.ends_with(b"\r")), "{pieces:?}");
    assert!(pieces.iter().any(|p| p.ends_with(b"da")), "{pieces:?}");
    // '°' is two bytes: some piece ends after the first.
    assert!(pieces.iter().any(|p| p.ends_with(&[0xc2])), "{pieces:?}");
}

#[tokio::test]
async fn anthropic_stream_split_at_awkward_places() {
    let text = read_anthropic(Reply::sse(ANTHROPIC_TEXT)).await;
    assert_eq!(text.text.as_deref(), Some(TEXT));
    let calls = read_anthropic(Reply::sse(ANTHROPIC_TOOL_CALLS)).await;
    assert_eq!(
        tool_names(&calls),
        ["get_weather", "current_time", "search"]
    );

    for (recording, whole) in [(ANTHROPIC_TEXT, &text), (ANTHROPIC_TOOL_CALLS, &calls)] {
        for line_end in ["\n", "\r\n"] {
            let body = recording.replace('\n', line_end);
            let split = read_anthropic(Reply::sse_pieces(awkward_pieces(&body), PAUSE)).await;
            assert_eq!(&split, whole, "line ends {line_end:?}");
        }
    }
}

#[tokio::test]
async fn openai_stream_split_at_awkward_places() {
    let text = read_openai(Reply::sse(OPENAI_TEXT)).await;
    assert_eq!(text.text.as_deref(), Some(TEXT));
    let calls = read_openai(Reply::sse(OPENAI_TOOL_CALLS)).await;
    assert_eq!(
        tool_names(&calls),
        ["get_weather", "current_time", "search"]
    );

    for (recording, whole) in [(OPENAI_TEXT, &text), (OPENAI_TOOL_CALLS, &calls)] {
        for line_end in ["\n", "\r\n"] {
            let body = recording.replace('\n', line_end);
            let split = read_openai(Reply::sse_pieces(awkward_pieces(&body), PAUSE)).await;
            assert_eq!(&split, whole, "line ends {line_end:?}");
        }
    }
}
