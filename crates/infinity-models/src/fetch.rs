//! Fetching the text an agent file points to by url (skills with `url:`), with the same
//! retries and timeouts as model requests. The core has no HTTP client, so hosts fetch here and
//! hand the text to [`AgentFile::load_skills`].

use infinity_agent_core::model::{ModelError, ModelErrorKind};
use std::collections::BTreeMap;
use std::time::Duration;

use infinity_agent_core::agent::AgentFile;

use infinity_retry::RetryPolicy;

use crate::transport::{with_retries, Attempt, RequestPolicy, MODEL_REQUEST_RETRY};

/// A document that could not be fetched; the message names the url.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FetchError(pub String);

/// A skill that could not be loaded; the message names the agent file and the url.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: cannot load a skill: {source}")]
pub struct SkillFetchError {
    /// The agent file.
    pub file: String,
    /// Why.
    pub source: FetchError,
}

/// The largest document fetched, in bytes.
pub const MAX_FETCH_BYTES: usize = 1024 * 1024;

/// Fetches `url` as text (GET). Errors name the url: a 4xx at once, 5xx and connection errors
/// after retries, a body over [`MAX_FETCH_BYTES`].
pub async fn fetch_text(client: &reqwest::Client, url: &str) -> Result<String, FetchError> {
    let policy = RequestPolicy {
        retry: RetryPolicy {
            attempts: 4,
            ..MODEL_REQUEST_RETRY
        },
        timeout: Duration::from_secs(30),
        ..RequestPolicy::default()
    };
    let label = format!("GET {url}");
    with_retries(
        &label,
        &policy,
        || client.get(url),
        |response| async move {
            if response
                .content_length()
                .is_some_and(|n| n > MAX_FETCH_BYTES as u64)
            {
                return Err(Attempt::Fail(too_large(url)));
            }
            let bytes = response.bytes().await.map_err(|e| {
                Attempt::Retry(
                    ModelErrorKind::Network,
                    format!("GET {url}: reading the body: {e}"),
                    None,
                )
            })?;
            if bytes.len() > MAX_FETCH_BYTES {
                return Err(Attempt::Fail(too_large(url)));
            }
            String::from_utf8(bytes.to_vec()).map_err(|_| {
                Attempt::Fail(ModelError::terminal(
                    ModelErrorKind::BadAnswer,
                    format!("GET {url}: the body is not UTF-8 text"),
                ))
            })
        },
    )
    .await
    .map_err(|e| FetchError(e.text().to_owned()))
}

fn too_large(url: &str) -> ModelError {
    ModelError::terminal(
        ModelErrorKind::Refused,
        format!("GET {url}: the document is larger than {MAX_FETCH_BYTES} bytes"),
    )
}

/// Fetches every skill `url` of an agent file, by url, for [`AgentFile::load_skills`]. The
/// error names the skill's file and url.
pub async fn fetch_skills(file: &AgentFile) -> Result<BTreeMap<String, String>, SkillFetchError> {
    let urls = file.skill_urls();
    let mut fetched = BTreeMap::new();
    if urls.is_empty() {
        return Ok(fetched);
    }
    let client = reqwest::Client::new();
    for url in urls {
        let text = fetch_text(&client, url)
            .await
            .map_err(|source| SkillFetchError {
                file: file.path.display().to_string(),
                source,
            })?;
        fetched.insert(url.to_owned(), text);
    }
    Ok(fetched)
}
