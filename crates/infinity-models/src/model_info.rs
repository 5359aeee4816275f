//! What we know about models: context window, output limit, image support, prices.

use infinity_agent_core::cost::{Prices, Usd};

/// One model's limits and prices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelInfo {
    /// Tokens of context.
    pub context_window: u32,
    /// The `max_tokens` we ask for.
    pub max_output_tokens: u32,
    /// True when the model reads images.
    pub images: bool,
    /// What the provider charges for it, when we know (list prices, on-demand, standard tier).
    pub prices: Option<Prices>,
}

const DEFAULT: ModelInfo = ModelInfo {
    context_window: 128_000,
    max_output_tokens: 8_192,
    images: false,
    prices: None,
};

/// Prices in dollars per million tokens: input, output, cache reads, cache writes.
const fn per_million(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Option<Prices> {
    const fn usd(dollars: f64) -> Usd {
        Usd::from_nanos((dollars * 1e9 + 0.5) as u64)
    }
    Some(Prices {
        input: usd(input),
        output: usd(output),
        cache_read: Some(usd(cache_read)),
        cache_write: Some(usd(cache_write)),
    })
}

/// A Claude model: 200k tokens of context, images; cache reads cost a tenth of input, cache
/// writes (five-minute) a quarter more.
const fn claude(max_output_tokens: u32, images: bool, input: f64, output: f64) -> ModelInfo {
    ModelInfo {
        context_window: 200_000,
        max_output_tokens,
        images,
        prices: per_million(input, output, input / 10.0, input * 1.25),
    }
}

/// An OpenAI model with images; cached input at `cached` (OpenAI charges no cache writes, and
/// reports none).
const fn gpt(context_window: u32, input: f64, output: f64, cached: f64) -> ModelInfo {
    ModelInfo {
        context_window,
        max_output_tokens: 16_384,
        images: true,
        prices: per_million(input, output, cached, input),
    }
}

/// `(provider, model id prefix, info)`; the longest matching prefix wins. Prices are the
/// providers' published list prices when the entry was written; an agent file's `prices:`
/// overrides them (negotiated rates, batch tiers, models not listed here).
const CATALOG: &[(&str, &str, ModelInfo)] = &[
    (
        "anthropic",
        "claude-sonnet-4",
        claude(16_384, true, 3.0, 15.0),
    ),
    (
        "anthropic",
        "claude-opus-4",
        claude(16_384, true, 15.0, 75.0),
    ),
    (
        "anthropic",
        "claude-opus-4-5",
        claude(16_384, true, 5.0, 25.0),
    ),
    (
        "anthropic",
        "claude-haiku-4",
        claude(16_384, true, 1.0, 5.0),
    ),
    (
        "anthropic",
        "claude-3-5-haiku",
        claude(8_192, false, 0.8, 4.0),
    ),
    ("openai", "gpt-4.1", gpt(1_047_576, 2.0, 8.0, 0.5)),
    ("openai", "gpt-4.1-mini", gpt(1_047_576, 0.4, 1.6, 0.1)),
    ("openai", "gpt-4.1-nano", gpt(1_047_576, 0.1, 0.4, 0.025)),
    ("openai", "gpt-4o", gpt(128_000, 2.5, 10.0, 1.25)),
    ("openai", "gpt-4o-mini", gpt(128_000, 0.15, 0.6, 0.075)),
    ("openai", "gpt-5", gpt(400_000, 1.25, 10.0, 0.125)),
    ("openai", "gpt-5-mini", gpt(400_000, 0.25, 2.0, 0.025)),
    ("openai", "gpt-5-nano", gpt(400_000, 0.05, 0.4, 0.005)),
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
        let price = |provider: &str, model: &str| {
            let prices = lookup(provider, model).prices.unwrap();
            (prices.input.dollars(), prices.output.dollars())
        };
        assert_eq!(price("openai", "gpt-4.1-mini-2025"), (0.4, 1.6));
        assert_eq!(price("openai", "gpt-4.1"), (2.0, 8.0));
        assert_eq!(price("openai", "gpt-4o-mini"), (0.15, 0.6));
        assert_eq!(price("anthropic", "claude-opus-4-1"), (15.0, 75.0));
        assert_eq!(price("anthropic", "claude-opus-4-5-20251101"), (5.0, 25.0));
        assert_eq!(
            lookup("anthropic", "claude-sonnet-4-5").context_window,
            200_000
        );
        assert_eq!(lookup("openai", "llama3"), DEFAULT);
        assert_eq!(lookup("openai", "llama3").prices, None);
    }

    #[test]
    fn claude_cache_prices_follow_the_input_price() {
        let sonnet = lookup("anthropic", "claude-sonnet-4-5").prices.unwrap();
        assert_eq!(sonnet.cache_read.unwrap().dollars(), 0.3);
        assert_eq!(sonnet.cache_write.unwrap().dollars(), 3.75);
        let mini = lookup("openai", "gpt-4o-mini").prices.unwrap();
        assert_eq!(mini.cache_read.unwrap().nanos(), 75_000_000);
    }
}
