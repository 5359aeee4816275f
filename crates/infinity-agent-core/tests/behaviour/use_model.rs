//! A person switches the model a thread's completions use (`use_model`), and back: the next
//! completion answers with it, the record keeps it, the history says so, and a model the host
//! cannot make is refused without changing anything.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use infinity_agent_core::input::InputBody;
use infinity_agent_core::library::{AllowedModels, Library, ModelSource, ModelSourceError};
use infinity_agent_core::model::ModelProvider;
use infinity_agent_core::runtime::Front;
use infinity_agent_core::runtime::PostError;
use infinity_agent_core::scripted::ScriptedModel;

use crate::behaviour::harness::{assert_in_order, tid, Setup};

/// Makes `script:NAME` models that answer "NAME here"; anything else is unknown.
#[derive(Debug)]
struct Named;

#[async_trait]
impl ModelSource for Named {
    async fn make(&self, spec: &str) -> Result<Arc<dyn ModelProvider>, ModelSourceError> {
        let name = spec.strip_prefix("script:").ok_or_else(|| {
            ModelSourceError::UnknownProvider(format!("no provider for `{spec}`"))
        })?;
        let script = format!("rules:\n  - reply: {{text: \"{name} here\"}}\n");
        Ok(Arc::new(
            ScriptedModel::parse(&script, Path::new("named.yaml"))
                .map_err(|e| ModelSourceError::CannotMake(e.to_string()))?,
        ))
    }
}

#[tokio::test(start_paused = true)]
async fn a_thread_switches_models_and_back() {
    let mut setup = Setup::new("rules:\n  - reply: {text: \"agent model here\"}\n");
    let allowed = AllowedModels::new(
        ["script:other".to_owned(), "nowhere:big".to_owned()],
        "the test",
    );
    setup.library = Some(Library::new().with_models(Arc::new(Named), allowed));
    let mut h = setup.start().await;
    h.say("t", "hello").await;
    h.system
        .use_model(&tid("t"), Some("script:other"))
        .await
        .unwrap();
    h.say("t", "hello").await;
    assert_eq!(
        h.system
            .record(&tid("t"))
            .await
            .unwrap()
            .unwrap()
            .model
            .as_deref(),
        Some("script:other")
    );
    // A model the host cannot make is refused at once, naming why; nothing changes.
    let err = h
        .system
        .use_model(&tid("t"), Some("nowhere:big"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, PostError::BadModel { spec, why: ModelSourceError::UnknownProvider(_) } if spec == "nowhere:big")
            && err.to_string().contains("no provider for `nowhere:big`"),
        "{err}"
    );
    // A model the deployment does not list is refused before it is made, naming the list.
    let err = h
        .system
        .use_model(&tid("t"), Some("script:unlisted"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            PostError::BadModel {
                why: ModelSourceError::NotAllowed(_),
                ..
            }
        ) && err.to_string().contains("`script:unlisted` is not one")
            && err.to_string().contains("set with the test"),
        "{err}"
    );
    // The same input sent as it is (another surface) is refused on the thread, with a notice.
    h.send(
        "t",
        InputBody::UseModel {
            model: Some("nowhere:big".to_owned()),
        },
    )
    .await;
    h.system.use_model(&tid("t"), None).await.unwrap();
    h.say("t", "hello").await;
    let history = h.history("t").await;
    assert_in_order(
        &history,
        &[
            "assistant: agent model here",
            "notice: This thread's completions now use the model script:other",
            "assistant: other here",
            "notice: Not switched to the model `nowhere:big`: this host cannot make it; the thread keeps script:other.",
            "notice: This thread's completions use its agent's model again",
            "assistant: agent model here",
        ],
    );
    assert_eq!(
        h.system.record(&tid("t")).await.unwrap().unwrap().model,
        None
    );
    // The agent's own model, named, needs no listing: it is the same as going back to it.
    h.system
        .use_model(&tid("t"), Some("script:other"))
        .await
        .unwrap();
    h.system
        .use_model(&tid("t"), Some("script:test.script.yaml"))
        .await
        .unwrap();
    h.say("t", "hello").await;
    assert_eq!(
        h.system.record(&tid("t")).await.unwrap().unwrap().model,
        None
    );
    let history = h.history("t").await;
    assert!(
        history
            .last()
            .is_some_and(|e| e.contains("agent model here")),
        "{history:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_host_without_models_refuses_a_switch() {
    let mut h = Setup::new("rules:\n  - reply: {text: hi}\n").start().await;
    h.say("t", "hello").await;
    let err = h
        .system
        .use_model(&tid("t"), Some("script:other"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("allows none"), "{err}");
}
