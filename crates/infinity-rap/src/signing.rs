//! Authenticated callback URLs, and signed notifications.
//!
//! Every invocation carries a `callback_url` made for the one thread and call it was issued for:
//! `{base}/rap/callback/{thread}/{call}?exp={unix seconds}&sig={hex}`, where `sig` is an
//! HMAC-SHA256, under the deployment's secret, over the thread, the call and the expiry. A
//! callback whose URL was forged or altered (another thread, another call, a later expiry) fails
//! the signature check; one past its expiry is refused too. The expiry is long by default
//! ([`DEFAULT_TTL`]) because subscriptions deliver events for weeks.
//!
//! The other way round, the runtime signs its `/cancel_tool_call` and `/close_thread`
//! notifications, so a tool server can tell them from a stranger's. The callback URL also
//! carries `nk={hex}` ([`NOTIFICATION_KEY_PARAM`]): a [`NotificationKey`] for the thread and
//! that tool server, derived from the deployment's secret
//! ([`CallbackSigner::notification_key`]). Each notification to the server then carries
//! `X-Infinity-Signature: t={unix seconds},v1={hex}` ([`NOTIFICATION_SIGNATURE_HEADER`]), `v1`
//! being the HMAC-SHA256, keyed with the `nk` text, of `{t}.{body}`. A server verifies it with
//! [`NotificationKey::verify`]; the kit does it for every thread it was given a key for.

use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// How long a callback URL stays valid unless configured otherwise: 90 days.
pub const DEFAULT_TTL: Duration = Duration::from_secs(90 * 24 * 3600);

/// The shortest secret accepted, in bytes.
pub const MIN_SECRET_BYTES: usize = 32;

/// The query parameter of a callback URL that hands the tool server the thread's
/// [`NotificationKey`]. The callback receiver ignores it.
pub const NOTIFICATION_KEY_PARAM: &str = "nk";

/// The header that carries a notification's signature: `t={unix seconds},v1={hex}`.
pub const NOTIFICATION_SIGNATURE_HEADER: &str = "x-infinity-signature";

/// How far a notification's `t` may lie from the tool server's clock, either way: long enough
/// for skewed clocks and slow networks, short enough that a recorded notification is soon
/// useless to replay (and replaying one within the window only repeats what it asked).
pub const NOTIFICATION_TOLERANCE: Duration = Duration::from_secs(300);

/// Why a callback URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlRejection {
    /// The URL lacks `exp` or `sig`, or they are not well formed.
    #[error("the callback URL is not signed (missing or malformed exp/sig)")]
    Unsigned,
    /// The signature does not match the thread, call and expiry.
    #[error("the callback URL's signature does not match")]
    BadSignature,
    /// The URL's expiry has passed.
    #[error("the callback URL expired at {0} (unix seconds)")]
    Expired(i64),
}

impl UrlRejection {
    /// The HTTP status to answer with: 401 for unsigned or expired, 403 for a bad signature.
    pub fn status(&self) -> u16 {
        match self {
            UrlRejection::Unsigned | UrlRejection::Expired(_) => 401,
            UrlRejection::BadSignature => 403,
        }
    }
}

/// Why a signer could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the callback secret must be at least {MIN_SECRET_BYTES} bytes (it is {0})")]
pub struct WeakSecret(pub usize);

/// Makes and checks callback URLs.
#[derive(Clone)]
pub struct CallbackSigner {
    /// Keyed with the secret; cloned for each URL.
    keyed: HmacSha256,
    base_url: String,
    ttl: Duration,
}

impl std::fmt::Debug for CallbackSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("CallbackSigner")
            .field("base_url", &self.base_url)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl CallbackSigner {
    /// A signer for callbacks received at `base_url` (where the receiver's router is served),
    /// with [`DEFAULT_TTL`].
    pub fn new(secret: impl Into<Vec<u8>>, base_url: &str) -> Result<Self, WeakSecret> {
        let secret = secret.into();
        if secret.len() < MIN_SECRET_BYTES {
            return Err(WeakSecret(secret.len()));
        }
        let keyed = HmacSha256::new_from_slice(&secret).map_err(|_| WeakSecret(secret.len()))?;
        Ok(Self {
            keyed,
            base_url: base_url.trim_end_matches('/').to_owned(),
            ttl: DEFAULT_TTL,
        })
    }

    /// The same signer with another validity period.
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The base URL callbacks are received at.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    fn mac(&self, thread: &str, call: &str, expires: i64) -> HmacSha256 {
        let mut mac = self.keyed.clone();
        mac.update(format!("rap-callback-v1\n{thread}\n{call}\n{expires}").as_bytes());
        mac
    }

    /// The key that signs the notifications about `thread` sent to the tool server at
    /// `server_base_url` (its base URL as configured; a trailing `/` makes no difference):
    /// HMAC-SHA256 under the secret over `rap-notify-v1\n{thread}\n{server_base_url}`, hex.
    ///
    /// Each server gets its own key, so one server cannot sign notifications to another.
    pub fn notification_key(&self, thread: &str, server_base_url: &str) -> String {
        let server = server_base_url.trim_end_matches('/');
        let mut mac = self.keyed.clone();
        mac.update(format!("rap-notify-v1\n{thread}\n{server}").as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    fn forward_mac(&self, thread: &str) -> HmacSha256 {
        let mut mac = self.keyed.clone();
        mac.update(format!("rap-forward-v1\n{thread}").as_bytes());
        mac
    }

    /// The URL at which the host a conversation moved away from forwards the inputs of `thread`
    /// that still arrive there: `{base}/rap/forward/{thread}?sig=HMAC(secret,
    /// "rap-forward-v1\n{thread}")`. It does not expire: a tool may answer months later.
    pub fn forward_url(&self, thread: &str) -> String {
        let sig = hex::encode(self.forward_mac(thread).finalize().into_bytes());
        format!("{}/rap/forward/{thread}?sig={sig}", self.base_url)
    }

    /// Checks a forwarding URL's signature for `thread`.
    pub fn verify_forward(&self, thread: &str, sig: Option<&str>) -> Result<(), UrlRejection> {
        let sig = sig
            .and_then(|s| hex::decode(s).ok())
            .ok_or(UrlRejection::Unsigned)?;
        self.forward_mac(thread)
            .verify_slice(&sig)
            .map_err(|_| UrlRejection::BadSignature)
    }

    /// The callback URL for one call of one thread, valid from `now_unix` for the TTL. Thread
    /// and call ids are URL-safe (letters, digits, `_`, `-`).
    pub fn url_for(&self, thread: &str, call: &str, now_unix: i64) -> String {
        let expires = now_unix.saturating_add(self.ttl.as_secs() as i64);
        let sig = hex::encode(self.mac(thread, call, expires).finalize().into_bytes());
        format!(
            "{}/rap/callback/{thread}/{call}?exp={expires}&sig={sig}",
            self.base_url
        )
    }

    /// Checks the signed parts of a received callback URL.
    pub fn verify(
        &self,
        thread: &str,
        call: &str,
        expires: Option<&str>,
        sig: Option<&str>,
        now_unix: i64,
    ) -> Result<(), UrlRejection> {
        let expires: i64 = expires
            .and_then(|e| e.parse().ok())
            .ok_or(UrlRejection::Unsigned)?;
        let sig = sig
            .and_then(|s| hex::decode(s).ok())
            .ok_or(UrlRejection::Unsigned)?;
        // Constant-time comparison.
        self.mac(thread, call, expires)
            .verify_slice(&sig)
            .map_err(|_| UrlRejection::BadSignature)?;
        if now_unix > expires {
            return Err(UrlRejection::Expired(expires));
        }
        Ok(())
    }
}

/// The key a tool server checks one thread's notifications with: the `nk` of the thread's
/// callback URLs, 64 hex digits, used as the HMAC key as it is written (its ASCII bytes).
#[derive(Clone)]
pub struct NotificationKey {
    text: String,
    keyed: HmacSha256,
}

impl std::fmt::Debug for NotificationKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NotificationKey(..)") // never the key
    }
}

/// Why a text is not a [`NotificationKey`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a notification key (`nk`) must be 64 hex digits")]
pub struct InvalidNotificationKey;

/// Why a notification was refused. Answered with 401 and this text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotificationRejection {
    /// The request has no `X-Infinity-Signature` header.
    #[error("the notification is not signed: no X-Infinity-Signature header")]
    Unsigned,
    /// The header is not `t={unix seconds},v1={hex}`.
    #[error("the X-Infinity-Signature header is not `t=<unix seconds>,v1=<hex>`")]
    Malformed,
    /// No `v1` matches the body and `t` under the thread's key.
    #[error("the notification's signature does not match")]
    BadSignature,
    /// `t` is further from now than [`NOTIFICATION_TOLERANCE`].
    #[error(
        "the notification was signed at {signed_at} (unix seconds), more than {} s from now",
        NOTIFICATION_TOLERANCE.as_secs()
    )]
    Stale {
        /// The header's `t`.
        signed_at: i64,
    },
}

impl NotificationKey {
    /// Reads a key as the runtime hands it out in `nk`.
    pub fn parse(text: &str) -> Result<Self, InvalidNotificationKey> {
        if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(InvalidNotificationKey);
        }
        let keyed =
            HmacSha256::new_from_slice(text.as_bytes()).map_err(|_| InvalidNotificationKey)?;
        Ok(NotificationKey {
            text: text.to_owned(),
            keyed,
        })
    }

    /// The key as written in `nk`.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn mac(&self, signed_at: i64, body: &[u8]) -> HmacSha256 {
        let mut mac = self.keyed.clone();
        mac.update(format!("{signed_at}.").as_bytes());
        mac.update(body);
        mac
    }

    /// The `X-Infinity-Signature` value for a notification whose body is exactly `body`, sent
    /// at `now_unix`.
    pub fn sign(&self, body: &[u8], now_unix: i64) -> String {
        let v1 = hex::encode(self.mac(now_unix, body).finalize().into_bytes());
        format!("t={now_unix},v1={v1}")
    }

    /// Checks a notification: `header` is its `X-Infinity-Signature` (if any), `body` its exact
    /// bytes. One `v1` that matches is enough (a sender may offer several while keys change);
    /// other fields are ignored, for later versions.
    pub fn verify(
        &self,
        header: Option<&str>,
        body: &[u8],
        now_unix: i64,
    ) -> Result<(), NotificationRejection> {
        let header = header.ok_or(NotificationRejection::Unsigned)?;
        let mut signed_at = None;
        let mut signatures = Vec::new();
        for field in header.split(',') {
            match field.trim().split_once('=') {
                Some(("t", t)) => {
                    signed_at = Some(
                        t.parse::<i64>()
                            .map_err(|_| NotificationRejection::Malformed)?,
                    )
                }
                Some(("v1", v1)) => {
                    signatures.push(hex::decode(v1).map_err(|_| NotificationRejection::Malformed)?)
                }
                _ => {}
            }
        }
        let signed_at = signed_at.ok_or(NotificationRejection::Malformed)?;
        if signatures.is_empty() {
            return Err(NotificationRejection::Malformed);
        }
        // Constant-time comparisons.
        let mac = self.mac(signed_at, body);
        if !signatures
            .iter()
            .any(|signature| mac.clone().verify_slice(signature).is_ok())
        {
            return Err(NotificationRejection::BadSignature);
        }
        if now_unix.abs_diff(signed_at) > NOTIFICATION_TOLERANCE.as_secs() {
            return Err(NotificationRejection::Stale { signed_at });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn parts(url: &str) -> (String, String, String, String) {
        let (path, query) = url.split_once('?').unwrap();
        let mut segs = path.rsplitn(3, '/');
        let call = segs.next().unwrap().to_owned();
        let thread = segs.next().unwrap().to_owned();
        let mut exp = String::new();
        let mut sig = String::new();
        for pair in query.split('&') {
            let (k, v) = pair.split_once('=').unwrap();
            match k {
                "exp" => exp = v.to_owned(),
                "sig" => sig = v.to_owned(),
                _ => {}
            }
        }
        (thread, call, exp, sig)
    }

    #[test]
    fn a_url_verifies_only_for_its_thread_call_and_expiry() {
        let signer = CallbackSigner::new(SECRET, "http://127.0.0.1:9/").unwrap();
        let url = signer.url_for("t-1", "call-1", 1_000);
        assert!(url.starts_with("http://127.0.0.1:9/rap/callback/t-1/call-1?exp="));
        let (thread, call, exp, sig) = parts(&url);
        assert_eq!(
            signer.verify(&thread, &call, Some(&exp), Some(&sig), 1_000),
            Ok(())
        );
        // Altered thread, call or expiry.
        assert_eq!(
            signer.verify("t-2", &call, Some(&exp), Some(&sig), 1_000),
            Err(UrlRejection::BadSignature)
        );
        assert_eq!(
            signer.verify(&thread, "call-2", Some(&exp), Some(&sig), 1_000),
            Err(UrlRejection::BadSignature)
        );
        let later = (exp.parse::<i64>().unwrap() + 1).to_string();
        assert_eq!(
            signer.verify(&thread, &call, Some(&later), Some(&sig), 1_000),
            Err(UrlRejection::BadSignature)
        );
        // Another deployment's secret.
        let other =
            CallbackSigner::new(b"another secret, 32 bytes or more".to_vec(), "http://x").unwrap();
        assert_eq!(
            other.verify(&thread, &call, Some(&exp), Some(&sig), 1_000),
            Err(UrlRejection::BadSignature)
        );
        // Unsigned, and expired.
        assert_eq!(
            signer.verify(&thread, &call, None, Some(&sig), 1_000),
            Err(UrlRejection::Unsigned)
        );
        assert_eq!(
            signer.verify(&thread, &call, Some(&exp), Some("zz"), 1_000),
            Err(UrlRejection::Unsigned)
        );
        let after = exp.parse::<i64>().unwrap() + 1;
        assert_eq!(
            signer.verify(&thread, &call, Some(&exp), Some(&sig), after),
            Err(UrlRejection::Expired(after - 1))
        );
        assert_eq!(UrlRejection::BadSignature.status(), 403);
        assert_eq!(UrlRejection::Expired(0).status(), 401);
    }

    #[test]
    fn short_secrets_are_refused() {
        assert_eq!(
            CallbackSigner::new(b"short".to_vec(), "http://x").unwrap_err(),
            WeakSecret(5)
        );
    }

    fn notification_key(signer: &CallbackSigner, thread: &str, server: &str) -> NotificationKey {
        NotificationKey::parse(&signer.notification_key(thread, server)).unwrap()
    }

    #[test]
    fn notification_keys_differ_by_thread_server_and_secret() {
        let signer = CallbackSigner::new(SECRET, "http://127.0.0.1:9").unwrap();
        let key = signer.notification_key("t-1", "http://tools:8701");
        assert_eq!(key.len(), 64);
        assert_eq!(key, signer.notification_key("t-1", "http://tools:8701/"));
        assert_ne!(key, signer.notification_key("t-2", "http://tools:8701"));
        assert_ne!(key, signer.notification_key("t-1", "http://tools:8702"));
        let other =
            CallbackSigner::new(b"another secret, 32 bytes or more".to_vec(), "http://x").unwrap();
        assert_ne!(key, other.notification_key("t-1", "http://tools:8701"));
        assert_eq!(NotificationKey::parse(&key).unwrap().as_str(), key);
    }

    #[test]
    fn notification_keys_are_64_hex_digits() {
        assert_eq!(
            NotificationKey::parse("abc").unwrap_err(),
            InvalidNotificationKey
        );
        assert!(NotificationKey::parse(&"g".repeat(64)).is_err());
        assert!(NotificationKey::parse(&"0".repeat(64)).is_ok());
    }

    #[test]
    fn a_notification_verifies_only_with_its_key_body_and_time() {
        let signer = CallbackSigner::new(SECRET, "http://127.0.0.1:9").unwrap();
        let key = notification_key(&signer, "t-1", "http://tools");
        let body = br#"{"thread_id":"t-1"}"#;
        let header = key.sign(body, 1_000);
        assert!(header.starts_with("t=1000,v1="), "{header}");

        assert_eq!(key.verify(Some(&header), body, 1_000), Ok(()));
        assert_eq!(key.verify(Some(&header), body, 1_300), Ok(()));
        assert_eq!(key.verify(Some(&header), body, 700), Ok(()));
        let stale = Err(NotificationRejection::Stale { signed_at: 1_000 });
        assert_eq!(key.verify(Some(&header), body, 1_301), stale);
        assert_eq!(key.verify(Some(&header), body, 699), stale);

        // Another body, another key, another time.
        let bad = Err(NotificationRejection::BadSignature);
        assert_eq!(
            key.verify(Some(&header), br#"{"thread_id":"t-2"}"#, 1_000),
            bad
        );
        let other = notification_key(&signer, "t-2", "http://tools");
        assert_eq!(other.verify(Some(&header), body, 1_000), bad);
        let moved = header.replacen("t=1000", "t=1001", 1);
        assert_eq!(key.verify(Some(&moved), body, 1_000), bad);

        // Several v1 (keys in rotation), unknown fields and spaces are fine.
        let v1 = header.split_once(",v1=").unwrap().1;
        let rotated = format!("t=1000, v1={}, v0=ab, v1={v1}", "00".repeat(32));
        assert_eq!(key.verify(Some(&rotated), body, 1_000), Ok(()));

        // Missing or malformed headers.
        assert_eq!(
            key.verify(None, body, 1_000),
            Err(NotificationRejection::Unsigned)
        );
        for malformed in [
            "",
            "t=1000",
            &format!("v1={v1}"),
            "t=soon,v1=00",
            "t=1,v1=zz",
        ] {
            assert_eq!(
                key.verify(Some(malformed), body, 1_000),
                Err(NotificationRejection::Malformed),
                "{malformed}"
            );
        }
    }
}
