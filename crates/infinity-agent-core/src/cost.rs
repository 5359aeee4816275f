//! What completions cost: money kept exactly, a model's prices, and a conversation's lifetime
//! budget.
//!
//! Money is counted in billionths of a US dollar ([`Usd`]) so that adding up a conversation's
//! many small completions never drifts; it reads and writes as a plain number of dollars
//! (`2.5`), in agent files, records and the HTTP API alike.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Billionths of a dollar in one dollar.
const NANOS: u64 = 1_000_000_000;

/// An amount of US dollars, exact to a billionth.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Usd(u64);

impl Usd {
    /// Nothing.
    pub const ZERO: Usd = Usd(0);

    /// `nanos` billionths of a dollar.
    pub const fn from_nanos(nanos: u64) -> Self {
        Self(nanos)
    }

    /// The amount in billionths of a dollar.
    pub const fn nanos(self) -> u64 {
        self.0
    }

    /// The most whole dollars an amount may have (what a billionth's count holds, about 18
    /// billion dollars).
    pub const MAX_DOLLARS: u64 = u64::MAX / NANOS;

    /// `dollars` (rounded to a billionth), or `None` for a negative, infinite or not-a-number
    /// amount, or one past what is kept (about 18 billion dollars).
    pub fn from_dollars(dollars: f64) -> Option<Self> {
        let nanos = (dollars * NANOS as f64).round();
        (nanos.is_finite() && nanos >= 0.0 && nanos < u64::MAX as f64).then_some(Self(nanos as u64))
    }

    /// The amount in dollars.
    pub fn dollars(self) -> f64 {
        self.0 as f64 / NANOS as f64
    }

    /// The sum, held at the largest amount kept rather than wrapping.
    #[must_use]
    pub fn saturating_add(self, other: Usd) -> Usd {
        Usd(self.0.saturating_add(other.0))
    }
}

impl fmt::Display for Usd {
    /// `$12.35` from a dollar up, `$0.0123` below, `<$0.0001` for less than that but not nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dollars = self.dollars();
        if self.0 >= NANOS {
            write!(f, "${dollars:.2}")
        } else if self.0 == 0 || self.0 >= NANOS / 10_000 {
            write!(f, "${dollars:.4}")
        } else {
            f.write_str("<$0.0001")
        }
    }
}

impl Serialize for Usd {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.dollars())
    }
}

impl schemars::JsonSchema for Usd {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Usd".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "number",
            "minimum": 0,
            "maximum": Usd::MAX_DOLLARS,
            "description": "US dollars.",
        })
    }
}

impl<'de> Deserialize<'de> for Usd {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let dollars = f64::deserialize(deserializer)?;
        Usd::from_dollars(dollars).ok_or_else(|| {
            // An absurd amount is not repeated: it may print as hundreds of digits.
            let given = if dollars.abs() < 1e12 {
                format!("{dollars} is")
            } else {
                "that is".to_owned()
            };
            serde::de::Error::custom(format!(
                "{given} not an amount of dollars (a number from 0 to {})",
                group_thousands(Usd::MAX_DOLLARS)
            ))
        })
    }
}

/// `n` with commas between thousands: `18,446,744,073`.
fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// What a model charges, in dollars per million tokens of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    /// Per million input tokens (not read from or written to the prompt cache).
    pub input: Usd,
    /// Per million output tokens.
    pub output: Usd,
    /// Per million input tokens read from the prompt cache (default: the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<Usd>,
    /// Per million input tokens written to the prompt cache (default: the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<Usd>,
}

impl Prices {
    /// Input and output prices, in dollars per million tokens; cache reads and writes at the
    /// input price until [`Prices::with_cache`] says otherwise. Negative or non-finite prices
    /// count as nothing.
    pub fn per_million(input: f64, output: f64) -> Self {
        Self {
            input: Usd::from_dollars(input).unwrap_or_default(),
            output: Usd::from_dollars(output).unwrap_or_default(),
            cache_read: None,
            cache_write: None,
        }
    }

    /// The same, with prices of their own for cache reads and writes (dollars per million).
    #[must_use]
    pub fn with_cache(mut self, read: f64, write: f64) -> Self {
        self.cache_read = Usd::from_dollars(read);
        self.cache_write = Usd::from_dollars(write);
        self
    }

    /// What `input`, `output`, `cache_read` and `cache_write` tokens cost, to the billionth of
    /// a dollar.
    pub fn cost(&self, input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usd {
        let of = |tokens: u64, per_million: Usd| -> u128 {
            u128::from(tokens) * u128::from(per_million.nanos())
        };
        let total = of(input, self.input)
            + of(output, self.output)
            + of(cache_read, self.cache_read.unwrap_or(self.input))
            + of(cache_write, self.cache_write.unwrap_or(self.input));
        let nanos = (total + 500_000) / 1_000_000;
        Usd(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

/// A conversation's lifetime budget as a person set it (`infinity budget`, `POST
/// /threads/{id}/budget`); what it leaves out comes from the agent's limits.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Dollars the conversation's completions may cost, all its threads together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<Usd>,
    /// Tokens (prompt, cache and output) they may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

impl Budget {
    /// True when it sets nothing.
    pub fn is_empty(&self) -> bool {
        self.usd.is_none() && self.tokens.is_none()
    }

    /// Whether a person may set this budget: it must set dollars, tokens or both, and no zero
    /// (which would stop everything); the error says what is wrong.
    pub fn check(&self) -> Result<(), BudgetError> {
        if self.is_empty() {
            return Err(BudgetError::Empty);
        }
        if self.usd == Some(Usd::ZERO) || self.tokens == Some(0) {
            return Err(BudgetError::Zero);
        }
        Ok(())
    }

    /// This budget, with what it leaves out taken from `fallback`.
    #[must_use]
    pub fn or(self, fallback: Budget) -> Budget {
        Budget {
            usd: self.usd.or(fallback.usd),
            tokens: self.tokens.or(fallback.tokens),
        }
    }
}

/// Why a person may not set a budget ([`Budget::check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BudgetError {
    /// It sets neither dollars nor tokens.
    #[error("a budget needs dollars (usd), tokens, or both")]
    Empty,
    /// It sets a zero, which would stop everything.
    #[error("a budget of zero stops everything; give an amount above zero")]
    Zero,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_reads_and_writes_as_dollars_and_adds_up_exactly() {
        let price: Usd = serde_json::from_str("0.3").unwrap();
        assert_eq!(price.nanos(), 300_000_000);
        assert_eq!(serde_json::to_string(&price).unwrap(), "0.3");
        // A thousand completions of 0.1 cents each are exactly one dollar.
        let mut total = Usd::ZERO;
        for _ in 0..1000 {
            total = total.saturating_add(Usd::from_dollars(0.001).unwrap());
        }
        assert_eq!(total, Usd::from_dollars(1.0).unwrap());
        assert!(serde_json::from_str::<Usd>("-1").is_err());
        let absurd = serde_json::from_str::<Usd>("1e300")
            .unwrap_err()
            .to_string();
        assert!(
            absurd.contains("not an amount of dollars (a number from 0 to 18,446,744,073)")
                && absurd.len() < 120,
            "{absurd}"
        );
        let negative = serde_json::from_str::<Usd>("-2").unwrap_err().to_string();
        assert!(negative.starts_with("-2 is not"), "{negative}");
        let largest = format!("{}", Usd::MAX_DOLLARS);
        assert!(serde_json::from_str::<Usd>(&largest).is_ok());
        assert_eq!(Usd::from_dollars(f64::NAN), None);
        assert_eq!(Usd::from_dollars(1e30), None);
    }

    #[test]
    fn amounts_read_at_a_glance() {
        let usd = |d: f64| Usd::from_dollars(d).unwrap().to_string();
        assert_eq!(usd(12.345), "$12.35");
        assert_eq!(usd(0.01234), "$0.0123");
        assert_eq!(usd(0.0), "$0.0000");
        assert_eq!(usd(0.00001), "<$0.0001");
    }

    #[test]
    fn tokens_are_priced_per_million_with_cache_prices_of_their_own() {
        // Anthropic's Sonnet: $3 in, $15 out, $0.30 cache reads, $3.75 cache writes.
        let sonnet = Prices::per_million(3.0, 15.0).with_cache(0.3, 3.75);
        let cost = sonnet.cost(1_000, 500, 10_000, 2_000);
        // 0.003 + 0.0075 + 0.003 + 0.0075
        assert_eq!(cost, Usd::from_dollars(0.021).unwrap());
        // Without cache prices, cache tokens cost what input tokens do.
        let plain = Prices::per_million(2.0, 8.0);
        assert_eq!(
            plain.cost(0, 0, 1_000_000, 0),
            Usd::from_dollars(2.0).unwrap()
        );
        // One token of a cheap model still counts (rounded to the billionth).
        let cheap = Prices::per_million(0.075, 0.3);
        assert_eq!(cheap.cost(1, 0, 0, 0).nanos(), 75);
        assert_eq!(cheap.cost(u64::MAX, u64::MAX, 0, 0).nanos(), u64::MAX);
    }

    #[test]
    fn prices_in_a_file_name_their_fields() {
        let prices: Prices = serde_json::from_str(r#"{"input": 1, "output": 5}"#).unwrap();
        assert_eq!(prices, Prices::per_million(1.0, 5.0));
        let err = serde_json::from_str::<Prices>(r#"{"input": 1, "outptu": 5}"#).unwrap_err();
        assert!(err.to_string().contains("outptu"), "{err}");
    }
}
