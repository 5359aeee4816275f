//! `wake_if`: a small expression over a subscription event's JSON that decides whether the
//! event wakes the model. The runtime evaluates it (never a model); it cannot loop, call out or
//! allocate more than its own size.
//!
//! ```text
//! expr    := or
//! or      := and ("||" and)*
//! and     := unary ("&&" unary)*
//! unary   := "!" unary | compare
//! compare := operand (("==" | "!=" | "<" | "<=" | ">" | ">=") operand)?
//! operand := number | "string" | 'string' | true | false | null | path | "(" expr ")"
//! path    := ("$" | name) ("." name | "[" index "]")*
//! ```
//!
//! A path reads the event: `price` is its field `price`, `quote.bid` a nested one, `levels[0]`
//! an array item, `$` the whole event. An event whose text is not JSON is a string (`$`). A path
//! that is not there is `null`. `==` and `!=` compare JSON values (numbers as numbers); `<`,
//! `<=`, `>`, `>=` compare two numbers or two strings and are false for anything else. An
//! operand on its own is true unless it is `false`, `null`, `0`, `""` or missing.

use std::cmp::Ordering;

use serde_json::Value;

/// The longest expression accepted, in bytes.
pub const MAX_WAKE_IF_BYTES: usize = 500;

/// A parsed `wake_if` expression.
#[derive(Debug, Clone, PartialEq)]
pub struct WakeIf {
    expr: Expr,
}

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Compare(Box<Expr>, Op, Box<Expr>),
    Literal(Value),
    Path(Vec<Step>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
}

/// Why an expression was refused: what was wrong and where (a byte offset).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("wake_if: {problem} at position {at} of `{text}`")]
pub struct WakeIfError {
    /// What was wrong.
    pub problem: String,
    /// The byte offset.
    pub at: usize,
    /// The expression.
    pub text: String,
}

impl WakeIf {
    /// Parses `text`, refusing what is not an expression of the language (see the module docs).
    pub fn parse(text: &str) -> Result<Self, WakeIfError> {
        if text.len() > MAX_WAKE_IF_BYTES {
            return Err(WakeIfError {
                problem: format!("longer than {MAX_WAKE_IF_BYTES} bytes"),
                at: MAX_WAKE_IF_BYTES,
                text: text.chars().take(60).collect::<String>() + "…",
            });
        }
        let mut parser = Parser {
            text,
            at: 0,
            depth: 0,
        };
        let expr = parser.or()?;
        parser.skip_space();
        if parser.at < text.len() {
            return Err(parser.error("unexpected text after the expression"));
        }
        Ok(Self { expr })
    }

    /// True when the event (its text, parsed as JSON if it is JSON) matches.
    pub fn matches(&self, event_text: &str) -> bool {
        let event = serde_json::from_str::<Value>(event_text)
            .unwrap_or_else(|_| Value::String(event_text.to_owned()));
        truthy(&eval(&self.expr, &event))
    }
}

fn eval(expr: &Expr, event: &Value) -> Value {
    match expr {
        Expr::Or(a, b) => Value::Bool(truthy(&eval(a, event)) || truthy(&eval(b, event))),
        Expr::And(a, b) => Value::Bool(truthy(&eval(a, event)) && truthy(&eval(b, event))),
        Expr::Not(a) => Value::Bool(!truthy(&eval(a, event))),
        Expr::Literal(v) => v.clone(),
        Expr::Path(steps) => {
            let mut at = event;
            for step in steps {
                let next = match (step, at) {
                    (Step::Field(name), Value::Object(map)) => map.get(name),
                    (Step::Index(i), Value::Array(items)) => items.get(*i),
                    _ => None,
                };
                match next {
                    Some(v) => at = v,
                    None => return Value::Null,
                }
            }
            at.clone()
        }
        Expr::Compare(a, op, b) => {
            let (a, b) = (eval(a, event), eval(b, event));
            let order = match (&a, &b) {
                (Value::Number(x), Value::Number(y)) => x
                    .as_f64()
                    .zip(y.as_f64())
                    .and_then(|(x, y)| x.partial_cmp(&y)),
                (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
                _ => None,
            };
            Value::Bool(match op {
                Op::Eq => order.map_or(a == b, |o| o == Ordering::Equal),
                Op::Ne => order.map_or(a != b, |o| o != Ordering::Equal),
                Op::Lt => order == Some(Ordering::Less),
                Op::Le => matches!(order, Some(Ordering::Less | Ordering::Equal)),
                Op::Gt => order == Some(Ordering::Greater),
                Op::Ge => matches!(order, Some(Ordering::Greater | Ordering::Equal)),
            })
        }
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// Nesting deeper than this is refused (the parser recurses).
const MAX_DEPTH: usize = 32;

struct Parser<'a> {
    text: &'a str,
    at: usize,
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, problem: impl Into<String>) -> WakeIfError {
        WakeIfError {
            problem: problem.into(),
            at: self.at,
            text: self.text.to_owned(),
        }
    }

    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn skip_space(&mut self) {
        let trimmed = self.rest().trim_start();
        self.at = self.text.len() - trimmed.len();
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_space();
        if self.rest().starts_with(token) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> Result<Expr, WakeIfError> {
        let mut left = self.and()?;
        while self.eat("||") {
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, WakeIfError> {
        let mut left = self.unary()?;
        while self.eat("&&") {
            left = Expr::And(Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, WakeIfError> {
        self.skip_space();
        if self.rest().starts_with('!') && !self.rest().starts_with("!=") {
            self.at += 1;
            self.nest()?;
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.compare()
    }

    fn nest(&mut self) -> Result<(), WakeIfError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(format!("nested more than {MAX_DEPTH} deep")));
        }
        Ok(())
    }

    fn compare(&mut self) -> Result<Expr, WakeIfError> {
        let left = self.operand()?;
        self.skip_space();
        let ops = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
        ];
        for (token, op) in ops {
            if self.eat(token) {
                let right = self.operand()?;
                return Ok(Expr::Compare(Box::new(left), op, Box::new(right)));
            }
        }
        if self.rest().starts_with('=') {
            return Err(self.error("`=` is not an operator; compare with `==`"));
        }
        Ok(left)
    }

    fn operand(&mut self) -> Result<Expr, WakeIfError> {
        self.skip_space();
        let Some(c) = self.rest().chars().next() else {
            return Err(self.error("expected a value, a path or `(`, found the end"));
        };
        match c {
            '(' => {
                self.at += 1;
                self.nest()?;
                let inner = self.or()?;
                self.depth -= 1;
                if !self.eat(")") {
                    return Err(self.error("expected `)`"));
                }
                Ok(inner)
            }
            '"' | '\'' => self.string(c),
            '-' | '0'..='9' => self.number(),
            '$' => {
                self.at += 1;
                self.path(Vec::new())
            }
            c if c.is_alphabetic() || c == '_' => {
                let name = self.name();
                match name.as_str() {
                    "true" => Ok(Expr::Literal(Value::Bool(true))),
                    "false" => Ok(Expr::Literal(Value::Bool(false))),
                    "null" => Ok(Expr::Literal(Value::Null)),
                    _ => self.path(vec![Step::Field(name)]),
                }
            }
            other => Err(self.error(format!("unexpected `{other}`"))),
        }
    }

    fn name(&mut self) -> String {
        let len = self
            .rest()
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(self.rest().len());
        let name = self.rest()[..len].to_owned();
        self.at += len;
        name
    }

    fn path(&mut self, mut steps: Vec<Step>) -> Result<Expr, WakeIfError> {
        loop {
            if self.rest().starts_with('.') {
                self.at += 1;
                let name = self.name();
                if name.is_empty() {
                    return Err(self.error("expected a field name after `.`"));
                }
                steps.push(Step::Field(name));
            } else if self.rest().starts_with('[') {
                self.at += 1;
                let len = self
                    .rest()
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(self.rest().len());
                let index = self.rest()[..len]
                    .parse::<usize>()
                    .map_err(|_| self.error("expected an index (0, 1, ...) after `[`"))?;
                self.at += len;
                if !self.rest().starts_with(']') {
                    return Err(self.error("expected `]`"));
                }
                self.at += 1;
                steps.push(Step::Index(index));
            } else {
                return Ok(Expr::Path(steps));
            }
        }
    }

    fn string(&mut self, quote: char) -> Result<Expr, WakeIfError> {
        let start = self.at;
        self.at += 1;
        let mut out = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                c if c == quote => {
                    self.at += i + 1;
                    return Ok(Expr::Literal(Value::String(out)));
                }
                '\\' => match chars.next() {
                    Some((_, e @ ('\\' | '"' | '\''))) => out.push(e),
                    Some((_, 'n')) => out.push('\n'),
                    _ => {
                        self.at += i;
                        return Err(self.error("unknown escape (use \\\\, \\\", \\' or \\n)"));
                    }
                },
                c => out.push(c),
            }
        }
        self.at = start;
        Err(self.error("a string is not closed"))
    }

    fn number(&mut self) -> Result<Expr, WakeIfError> {
        let len = self
            .rest()
            .char_indices()
            .find(|&(i, c)| {
                !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || (c == '-' && i == 0))
            })
            .map_or(self.rest().len(), |(i, _)| i);
        let text = &self.rest()[..len];
        let value: Value = serde_json::from_str(text)
            .ok()
            .filter(Value::is_number)
            .ok_or_else(|| self.error(format!("`{text}` is not a number")))?;
        self.at += len;
        Ok(Expr::Literal(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wakes(expr: &str, event: &str) -> bool {
        WakeIf::parse(expr).unwrap().matches(event)
    }

    #[test]
    fn comparisons_over_the_events_json() {
        let quote =
            r#"{"symbol": "ACME", "price": 99.5, "book": {"bids": [98, 97]}, "halted": false}"#;
        assert!(wakes(r#"price < 100 && symbol == "ACME""#, quote));
        assert!(!wakes(r#"price < 100 && symbol == 'XYZ'"#, quote));
        assert!(wakes("price >= 99.5 && price <= 99.5", quote));
        assert!(wakes(
            "book.bids[0] == 98 && book.bids[1] < book.bids[0]",
            quote
        ));
        assert!(wakes("!halted && (price > 200 || symbol != 'X')", quote));
        assert!(wakes("price == 99.50", quote), "numbers compare as numbers");
        // Missing is null, and null is neither less nor greater than anything.
        assert!(wakes("volume == null", quote));
        assert!(!wakes("volume < 5", quote));
        assert!(!wakes("volume > 5", quote));
        assert!(!wakes("book.asks[0]", quote));
        // Mixed types never order.
        assert!(!wakes("symbol < 5", quote));
        // Text that is not JSON is a string.
        assert!(wakes("$ == 'unchanged'", "unchanged"));
        assert!(!wakes("price < 100", "unchanged"));
    }

    #[test]
    fn what_is_not_an_expression_is_refused_with_where() {
        let cases = [
            (
                "price < ",
                "expected a value, a path or `(`, found the end at position 8",
            ),
            (
                "price = 5",
                "`=` is not an operator; compare with `==` at position 6",
            ),
            ("(price < 5", "expected `)` at position 10"),
            (
                "price < 5 5",
                "unexpected text after the expression at position 10",
            ),
            ("symbol == 'ACME", "a string is not closed at position 10"),
            (
                "levels[x] > 1",
                "expected an index (0, 1, ...) after `[` at position 7",
            ),
            ("price < 1.2.3", "`1.2.3` is not a number at position 8"),
            (
                "price # 5",
                "unexpected text after the expression at position 6",
            ),
        ];
        for (expr, want) in cases {
            let err = WakeIf::parse(expr).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("wake_if: {want} of `{expr}`"),
                "{expr}"
            );
        }
        let deep = format!("{}1{}", "(".repeat(40), ")".repeat(40));
        assert!(WakeIf::parse(&deep).unwrap_err().problem.contains("nested"));
        let long = "a == 1 || ".repeat(60) + "a == 1";
        assert!(WakeIf::parse(&long)
            .unwrap_err()
            .problem
            .contains("longer than"));
    }
}
