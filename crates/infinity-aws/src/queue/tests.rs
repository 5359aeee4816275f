use infinity_agent_core::ids::ThreadId;

use super::*;

#[test]
fn batches_take_ten_messages_within_one_messages_bytes_in_order() {
    let bodies = |n: usize, len: usize| (0..n).map(|i| (i, "x".repeat(len))).collect();
    let sizes = |b: Vec<Vec<(usize, String)>>| b.iter().map(Vec::len).collect::<Vec<_>>();
    assert_eq!(sizes(batches(bodies(25, 10), 1000)), [10, 10, 5]);
    assert_eq!(sizes(batches(bodies(5, 400), 1000)), [2, 2, 1]);
    // A body as big as the limit goes alone; order is kept across batches.
    let all = batches(bodies(3, 1000), 1000);
    assert_eq!(sizes(all.clone()), [1, 1, 1]);
    let order: Vec<usize> = all.into_iter().flatten().map(|(i, _)| i).collect();
    assert_eq!(order, [0, 1, 2]);
    assert!(batches(Vec::new(), 10).is_empty());
}

#[test]
fn output_bodies_carry_their_id_first_within_the_limit() {
    use infinity_agent_core::effect::OutputKind;
    let event = OutputEvent::new(
        ThreadId::new("t1").unwrap(),
        Timestamp::UNIX_EPOCH,
        OutputKind::AssistantText {
            text: "word ".repeat(1_000),
        },
    );
    let id = EffectId::new("fx-0001").unwrap();
    let body = with_id(&id, &event, 100_000).unwrap();
    assert!(
        body.starts_with(r#"{"id":"fx-0001","thread_id":"t1""#),
        "{body}"
    );
    let back: OutputEvent = serde_json::from_str(&body).unwrap();
    assert_eq!(back, event);
    let cut = with_id(&id, &event, 1_000).unwrap();
    assert!(cut.len() <= 1_000, "{}", cut.len());
    let value: serde_json::Value = serde_json::from_str(&cut).unwrap();
    assert_eq!(
        (value["id"].as_str(), value["truncated"].as_bool()),
        (Some("fx-0001"), Some(true))
    );
}

#[test]
fn a_reader_drops_copies_by_id_and_forgets_the_oldest() {
    let mut seen = SeenEvents::new(2);
    assert!(seen.first_time(r#"{"id":"a","type":"error"}"#));
    assert!(!seen.first_time(r#"{"id":"a","type":"error"}"#));
    assert!(seen.first_time(r#"{"id":"b"}"#));
    assert!(seen.first_time(r#"{"id":"c"}"#));
    assert!(seen.first_time(r#"{"id":"a"}"#), "a was forgotten");
    assert!(seen.first_time(r#"{"type":"error"}"#));
    assert!(seen.first_time(r#"{"type":"error"}"#), "no id, no copy");
}

#[test]
fn schedule_names_are_stable_short_and_valid() {
    let id = InputId::new("x".repeat(128)).unwrap();
    let a = schedule_name(&id);
    assert_eq!(a, schedule_name(&id));
    assert!(a.len() <= 64, "{a}");
    assert!(a
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)));
    assert_ne!(a, schedule_name(&InputId::new("x".repeat(127)).unwrap()));
}
