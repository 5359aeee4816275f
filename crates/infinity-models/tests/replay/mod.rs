//! The model adapters against a local HTTP server that replays hand-written provider responses
//! (Anthropic's event stream, OpenAI's chunk stream) and records the requests it receives.

mod fixtures;
mod recordings;
mod server;

mod bad_request;
mod images;
mod malformed_stream;
mod max_tokens;
mod overloaded;
mod request_body;
mod retries;
mod skill_urls;
mod split_stream;
mod stand_in;
mod streaming;
mod text_reply;
mod timeout;
mod tool_calls;
mod wire_format;
mod wire_rules;
