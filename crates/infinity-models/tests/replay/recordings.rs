//! Responses as the providers send them, written by hand after their documented wire formats.

/// Anthropic: a text reply, with a ping, prompt caching usage and a character outside ASCII.
pub const ANTHROPIC_TEXT: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":1200,"cache_read_input_tokens":3400,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"It is 18°C"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" and sunny in Paris ☀"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}

event: message_stop
data: {"type":"message_stop"}

"#;

/// The text of [`ANTHROPIC_TEXT`] and [`OPENAI_TEXT`].
pub const TEXT: &str = "It is 18°C and sunny in Paris ☀";

/// Anthropic: some text, then one tool call whose input arrives in pieces.
pub const ANTHROPIC_TOOL_CALL: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me check."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Par"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"is\", \"unit\": \"celsius\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

"#;

/// Anthropic: three tool calls in one reply, one of them without arguments.
pub const ANTHROPIC_TOOL_CALLS: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01Aq9w938a90dw8q","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":512,"cache_creation_input_tokens":0,"cache_read_input_tokens":2048,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01Paris","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":" \"Paris\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_02Time","name":"current_time","input":{}}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_03Search","name":"search","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"query\": \"Oslo forecast\", \"limit\": 3, "}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"filters\": {\"sites\": [\"yr.no\"]}}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":120}}

event: message_stop
data: {"type":"message_stop"}

"#;

/// Anthropic: a reply cut off at `max_tokens`.
pub const ANTHROPIC_MAX_TOKENS: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01Cut","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":30,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The forecast for the next"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":16384}}

event: message_stop
data: {"type":"message_stop"}

"#;

/// Anthropic: the stream starts, then reports `overloaded_error` (the API's mid-stream error).
pub const ANTHROPIC_OVERLOADED_EVENT: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01Busy","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Half an answer"}}

event: error
data: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}

"#;

/// Anthropic: a stream with an event that is not JSON.
pub const ANTHROPIC_MALFORMED: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01Bad","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"It is

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}

event: message_stop
data: {"type":"message_stop"}

"#;

pub const ANTHROPIC_OVERLOADED_BODY: &str =
    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;

pub const ANTHROPIC_RATE_LIMIT_BODY: &str = r#"{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50,000 input tokens per minute."}}"#;

pub const ANTHROPIC_SERVER_ERROR_BODY: &str =
    r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#;

/// The message of [`ANTHROPIC_BAD_REQUEST_BODY`].
pub const ANTHROPIC_BAD_REQUEST_MESSAGE: &str =
    "messages.1.content.0.tool_use.input: Input should be a valid dictionary";

pub const ANTHROPIC_BAD_REQUEST_BODY: &str = r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0.tool_use.input: Input should be a valid dictionary"}}"#;

/// OpenAI: a text reply with cached prompt tokens in the final usage chunk.
pub const OPENAI_TEXT: &str = r#"data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-mini-2025-04-14","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-mini-2025-04-14","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":"It is 18°C"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-mini-2025-04-14","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":" and sunny in Paris ☀"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-mini-2025-04-14","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-mini-2025-04-14","system_fingerprint":"fp_eb9dce56a8","choices":[],"usage":{"prompt_tokens":1500,"completion_tokens":12,"total_tokens":1512,"prompt_tokens_details":{"cached_tokens":1280,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}

data: [DONE]

"#;

/// OpenAI: one tool call whose arguments arrive in pieces.
pub const OPENAI_TOOL_CALL: &str = r#"data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1741570000,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1741570000,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1741570000,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\": \"Paris\", \"unit\": \"celsius\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1741570000,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1741570000,"model":"gpt-4.1-mini-2025-04-14","choices":[],"usage":{"prompt_tokens":472,"completion_tokens":21,"total_tokens":493,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0}}}

data: [DONE]

"#;

/// OpenAI: three parallel tool calls, one of them without arguments.
pub const OPENAI_TOOL_CALLS: &str = r#"data: {"id":"chatcmpl-3","object":"chat.completion.chunk","created":1741570100,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_paris","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-3","object":"chat.completion.chunk","created":1741570100,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-3","object":"chat.completion.chunk","created":1741570100,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":" \"Paris\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-3","object":"chat.completion.chunk","created":1741570100,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_time","type":"function","function":{"name":"current_time","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-3","object":"chat.completion.chunk","created":1741570100,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"id":"call_search","type":"function","function":{"name":"search","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-3","object":"chat.completion.chunk","created":1741570100,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"function":{"arguments":"{\"query\": \"Oslo forecast\", \"limit\": 3, "}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-3","object":"chat.completion.chunk","created":1741570100,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"function":{"arguments":"\"filters\": {\"sites\": [\"yr.no\"]}}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-3","object":"chat.completion.chunk","created":1741570100,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}

data: {"id":"chatcmpl-3","object":"chat.completion.chunk","created":1741570100,"model":"gpt-4.1-mini-2025-04-14","choices":[],"usage":{"prompt_tokens":2560,"completion_tokens":64,"total_tokens":2624,"prompt_tokens_details":{"cached_tokens":2048,"audio_tokens":0}}}

data: [DONE]

"#;

/// OpenAI: a reply cut off at the token limit.
pub const OPENAI_LENGTH: &str = r#"data: {"id":"chatcmpl-4","object":"chat.completion.chunk","created":1741570200,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"role":"assistant","content":"The forecast for the next"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-4","object":"chat.completion.chunk","created":1741570200,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}],"usage":null}

data: {"id":"chatcmpl-4","object":"chat.completion.chunk","created":1741570200,"model":"gpt-4.1-mini-2025-04-14","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":16384,"total_tokens":16414,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0}}}

data: [DONE]

"#;

/// OpenAI: a stream with a chunk that is not JSON.
pub const OPENAI_MALFORMED: &str = r#"data: {"id":"chatcmpl-5","object":"chat.completion.chunk","created":1741570300,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"role":"assistant","content":"It is"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-5","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" 18

data: {"id":"chatcmpl-5","object":"chat.completion.chunk","created":1741570300,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}

data: [DONE]

"#;

pub const OPENAI_RATE_LIMIT_BODY: &str = r#"{"error":{"message":"Rate limit reached for gpt-4.1-mini in organization org-abc on tokens per min (TPM): Limit 200000, Used 199500, Requested 1200. Please try again in 210ms.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#;

pub const OPENAI_SERVER_ERROR_BODY: &str = r#"{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}"#;

/// The message of [`OPENAI_BAD_REQUEST_BODY`].
pub const OPENAI_BAD_REQUEST_MESSAGE: &str =
    "Invalid 'messages[1].tool_calls[0].function.name': string does not match pattern.";

pub const OPENAI_BAD_REQUEST_BODY: &str = r#"{"error":{"message":"Invalid 'messages[1].tool_calls[0].function.name': string does not match pattern.","type":"invalid_request_error","param":"messages[1].tool_calls[0].function.name","code":"invalid_value"}}"#;
