//! `sleep_until`: named zones, times in the past, DST changes.

use crate::behaviour::harness::{assert_in_order, start, tid};
use infinity_agent_core::history::Item;

fn script(date: &str, time: &str, zone: &str) -> String {
    format!(
        r#"
rules:
  - when: "^go$"
    reply:
      tool_calls: [{{name: sleep_until, args: {{date: "{date}", time: "{time}", timezone: "{zone}"}}}}]
  - when: "-> (Slept until|.*already past)"
    reply: {{text: "Done."}}
  - when: "(?i)error"
    reply: {{text: "Bad time."}}
"#
    )
}

/// The wall time at which the sleep's result was recorded.
async fn woke_at(h: &crate::behaviour::harness::Harness) -> jiff::Timestamp {
    let view = h.system.view(&tid("main")).await.unwrap();
    view.iter()
        .find(|e| matches!(&e.item, Item::ToolResult { name, .. } if name == "sleep_until"))
        .map(|e| e.at)
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn sleeps_until_a_local_time_in_a_named_zone() {
    // 12:00 in New York is 18:00 in Paris; sleep until 19:30 Paris time = 18:30 UTC.
    let mut h = start(&script("2026-03-07", "19:30", "Europe/Paris")).await;
    h.say("main", "go").await;
    assert_eq!(woke_at(&h).await.to_string(), "2026-03-07T18:30:00Z");
    assert_in_order(
        &h.lines("main"),
        &["result sleep_until: Slept until", "assistant: Done."],
    );
}

#[tokio::test(start_paused = true)]
async fn a_time_in_the_past_returns_at_once() {
    let mut h = start(&script("2026-03-07", "08:00:00", "America/New_York")).await;
    let before = h.now();
    h.say("main", "go").await;
    assert_in_order(
        &h.lines("main"),
        &[
            "result sleep_until: 2026-03-07 08:00:00 America/New_York",
            "already past",
            "assistant: Done.",
        ],
    );
    assert!(h.now().duration_since(before).as_secs() < 1);
}

#[tokio::test(start_paused = true)]
async fn across_a_dst_change_the_wall_clock_time_is_kept() {
    // From Saturday 12:00 EST to Sunday 12:00 EDT is 23 hours, not 24.
    let mut h = start(&script("2026-03-08", "12:00", "America/New_York")).await;
    let before = h.now();
    h.say("main", "go").await;
    let woke = woke_at(&h).await;
    assert_eq!(woke.to_string(), "2026-03-08T16:00:00Z");
    assert_eq!(woke.duration_since(before).as_hours(), 23);
}

#[tokio::test(start_paused = true)]
async fn a_skipped_local_time_moves_forward_by_the_gap() {
    // 02:30 does not exist on 2026-03-08 in New York; it resolves to 03:30 EDT.
    let mut h = start(&script("2026-03-08", "02:30", "America/New_York")).await;
    h.say("main", "go").await;
    assert_eq!(woke_at(&h).await.to_string(), "2026-03-08T07:30:00Z");
}

#[tokio::test(start_paused = true)]
async fn bad_zone_is_an_error_result_and_the_model_goes_on() {
    let mut h = start(&script("2026-03-08", "12:00", "Moon/Base")).await;
    h.say("main", "go").await;
    assert_in_order(
        &h.lines("main"),
        &[
            "error sleep_until: Error: `Moon/Base` is not a known IANA time zone",
            "assistant: Bad time.",
        ],
    );
}
