//! The `artifact` category's tools in the core: a page is published through an effect into the
//! host's store and noted on the thread, a comment wakes the thread and its answer is stored,
//! every bad call is an error naming what is wrong, and the guidance skill comes with the
//! category. (Serving pages, the sandbox and real comments over HTTP are tested in
//! `infinity-cli`'s `artifacts` and `stack` tests.)

use std::sync::Arc;

use infinity_agent_core::input::InputBody;
use infinity_agent_core::library::Library;
use infinity_agent_core::tools::internal::InternalTools;
use infinity_library::artifact::{Artifacts, CommentEvent, MemoryBlobs};
use infinity_library::LibraryExt;
use serde_json::json;

use infinity_agent_core::testing::harness::{assert_in_order, Setup};

const SCRIPT: &str = r#"
rules:
  - when: "^publish$"
    reply:
      tool_calls:
        - {name: artifact_publish, args: {title: "Plan", content: "<p>one</p>", files: {"a.css": "p{}"}, assets: true}}
  - when: "^untitled$"
    reply:
      tool_calls: [{name: artifact_publish, args: {title: " ", content: "x"}}]
  - when: "^bad file$"
    reply:
      tool_calls: [{name: artifact_publish, args: {title: "x", content: "x", files: {"../up": "x"}}}]
  - when: "^update (\\S+)$"
    reply:
      tool_calls: [{name: artifact_update, args: {id: "$1", content: "<p>two</p>", visibility: public}}]
  - when: "^reply (\\S+) (\\S+)$"
    reply:
      tool_calls: [{name: artifact_reply, args: {id: "$1", comment_id: "$2", text: "thanks"}}]
  - when: "^guide$"
    reply:
      tool_calls: [{name: skill_get, args: {skill: "artifact-pages"}}]
  - when: "^list$"
    reply:
      tool_calls: [{name: artifact_list, args: {}}]
  - reply: {text: "ok"}
"#;

#[tokio::test(start_paused = true)]
async fn pages_are_published_commented_on_answered_and_refused_with_reasons() {
    let blobs = Arc::new(MemoryBlobs::default());
    let store = Artifacts::new(blobs.clone(), "http://pages.test");
    let mut setup = Setup::new(SCRIPT);
    setup.categories = infinity_library::categories();
    setup.internal_tools = InternalTools::builder()
        .flag("artifact", true)
        .skills(false)
        .build();
    setup.library = Some(Library::new().with_artifacts(store.clone()));
    let mut h = setup.start().await;

    h.say("t", "publish").await;
    let record = h
        .system
        .record(&infinity_agent_core::testing::harness::tid("t"))
        .await
        .unwrap()
        .unwrap();
    let pages = infinity_library::artifact::pages_of(&record);
    let id = pages[0].id.clone();
    assert_eq!(pages[0].url, format!("http://pages.test/a/{id}"));
    // The record keeps the pages as the category's notes, not in a field of its own.
    assert!(record.category_notes.contains_key("artifact"));
    let meta = store
        .meta(&id)
        .await
        .unwrap()
        .expect("stored after the slice");
    assert_eq!(
        (meta.version, meta.assets, meta.files.clone()),
        (1, true, vec!["a.css".to_owned()])
    );
    assert_eq!(store.content(&id, 1).await.unwrap().unwrap(), "<p>one</p>");

    h.say("t", &format!("update {id}")).await;
    let meta = store.meta(&id).await.unwrap().unwrap();
    assert_eq!((meta.version, meta.visibility.as_str()), (2, "public"));
    assert_eq!(
        store.content(&id, 1).await.unwrap().unwrap(),
        "<p>one</p>",
        "kept"
    );

    // A comment wakes the thread, which sees it as a message; one on a page it did not publish,
    // or the same comment again, is dropped.
    let comment = |artifact: &str, comment: &str| {
        CommentEvent {
            artifact_id: artifact.to_owned(),
            comment_id: comment.to_owned(),
            author: "Ann".into(),
            text: "more detail".into(),
            at: jiff::Timestamp::UNIX_EPOCH,
        }
        .input()
    };
    h.send("t", comment(&id, "cm-1")).await;
    h.send("t", comment(&id, "cm-1")).await;
    h.send("t", comment("art-00000000000000000000", "cm-2"))
        .await;
    let history = h.history("t").await;
    let shown =
        format!("message: [artifact] Ann commented on \"Plan\" ({id}, comment cm-1): more detail");
    assert_eq!(
        history.iter().filter(|l| **l == shown).count(),
        1,
        "{history:#?}"
    );
    assert!(!history.iter().any(|l| l.contains("cm-2")), "{history:#?}");

    h.say("t", &format!("reply {id} cm-1")).await;
    h.say("t", &format!("reply {id} cm-9")).await;
    h.say("t", "reply art-nope cm-1").await;
    h.say("t", "untitled").await;
    h.say("t", "bad file").await;
    h.say("t", "list").await;
    h.say("t", "guide").await;
    let lines = h.history("t").await;
    assert_in_order(
        &lines,
        &[
            &format!("result artifact_reply: Answered comment cm-1 on {id}"),
            &format!("error artifact_reply: Error: page {id} has no comment `cm-9` (its comments: cm-1)."),
            &format!("error artifact_reply: Error: this thread published no page `art-nope` (its pages: {id})."),
            "error artifact_publish: Error: `title` is empty.",
            "error artifact_publish: Error: `../up` is not a file name",
            "\"unanswered\":0",
            // The guidance comes even with `skills: false`.
            "result skill_get: # Writing an artifact page",
        ],
    );
    let comments_answered = store.comments(&id).await.unwrap();
    assert!(
        comments_answered.is_empty(),
        "comments are stored by the host that takes them"
    );
    let answers =
        infinity_library::artifact::Blobs::list(blobs.as_ref(), &format!("{id}/answers/cm-1/"))
            .await
            .unwrap();
    assert_eq!(answers.len(), 1, "the answer is stored under its comment");
    // A comment sent as it was before category events were generic still arrives.
    let old: InputBody = serde_json::from_value(json!({
        "type": "artifact_comment", "artifact_id": id, "comment_id": "cm-3", "author": "Bo",
        "text": "older", "at": "1970-01-01T00:00:00Z"
    }))
    .unwrap();
    h.send("t", old).await;
    let history = h.history("t").await;
    let shown = format!("message: [artifact] Bo commented on \"Plan\" ({id}, comment cm-3): older");
    assert!(history.contains(&shown), "{history:#?}");
}

#[tokio::test(start_paused = true)]
async fn a_host_that_keeps_no_pages_says_so() {
    let mut setup = Setup::new(SCRIPT);
    setup.categories = infinity_library::categories();
    setup.internal_tools = InternalTools::builder().flag("artifact", true).build();
    let mut h = setup.start().await;
    h.say("t", "publish").await;
    assert_in_order(
        &h.history("t").await,
        &["error artifact_publish: Error: this host keeps no published pages"],
    );
}
