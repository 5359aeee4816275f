//! What we know about models: context window, output limit, image support, prices.

/// One model's limits and prices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelInfo {
    /// Tokens of context.
    pub context_window: u32,
    /// The `max_tokens` we ask for.
    pub max_output_tokens: u32,
    /// True when the model reads images.
    pub images: bool,
    /// US dollars per million input and output tokens, when known.
    pub prices: Option<(f64, f64)>,
}

const DEFAULT: ModelInfo = ModelInfo {
    context_window: 128_000,
    max_output_tokens: 8_192,
    images: false,
    prices: None,
};

/// `(provider, model id prefix, info)`; the longest matching prefix wins.
const CATALOG: &[(&str, &str, ModelInfo)] = &[
    (
        "anthropic",
        "claude-sonnet-4",
        ModelInfo {
            context_window: 200_000,
            max_output_tokens: 16_384,
            images: true,
            prices: Some((3.0, 15.0)),
        },
    ),
    (
        "anthropic",
        "claude-opus-4",
        ModelInfo {
            context_window: 200_000,
            max_output_tokens: 16_384,
            images: true,
            prices: Some((15.0, 75.0)),
        },
    ),
    (
        "anthropic",
        "claude-haiku-4",
        ModelInfo {
            context_window: 200_000,
            max_output_tokens: 16_384,
            images: true,
            prices: Some((1.0, 5.0)),
        },
    ),
    (
        "anthropic",
        "claude-3-5-haiku",
        ModelInfo {
            context_window: 200_000,
            max_output_tokens: 8_192,
            images: false,
            prices: Some((0.8, 4.0)),
        },
    ),
    (
        "openai",
        "gpt-4.1",
        ModelInfo {
            context_window: 1_047_576,
            max_output_tokens: 16_384,
            images: true,
            prices: Some((2.0, 8.0)),
        },
    ),
    (
        "openai",
        "gpt-4.1-mini",
        ModelInfo {
            context_window: 1_047_576,
            max_output_tokens: 16_384,
            images: true,
            prices: Some((0.4, 1.6)),
        },
    ),
    (
        "openai",
        "gpt-4o",
        ModelInfo {
            context_window: 128_000,
            max_output_tokens: 16_384,
            images: true,
            prices: Some((2.5, 10.0)),
        },
    ),
];

/// The entry for a model, or conservative defaults for models we do not know.
pub fn lookup(provider: &str, model: &str) -> ModelInfo {
    CATALOG
        .iter()
        .filter(|(p, prefix, _)| *p == provider && model.starts_with(prefix))
        .max_by_key(|(_, prefix, _)| prefix.len())
        .map_or(DEFAULT, |(_, _, info)| *info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins_and_unknown_models_get_defaults() {
        assert_eq!(
            lookup("openai", "gpt-4.1-mini-2025").prices,
            Some((0.4, 1.6))
        );
        assert_eq!(lookup("openai", "gpt-4.1").prices, Some((2.0, 8.0)));
        assert_eq!(
            lookup("anthropic", "claude-sonnet-4-5").context_window,
            200_000
        );
        assert_eq!(lookup("openai", "llama3"), DEFAULT);
    }
}
