//! Compaction: the summary first, then the turn over it; and a slice over the window from the
//! newest summary's cut is the slice over the whole history.

use super::*;

#[test]
fn compaction_asks_for_a_summary_first_then_the_turn_sees_it() {
    let mut thread = Thread::with(Limits::default(), 1_000);
    for i in 0..4 {
        thread.slice(
            vec![user(&format!("m{i}"), &format!("message {i}"))],
            vec![Ok(text(&format!("reply {i}")))],
        );
    }
    // The last prompt used 80% of the window; the agent compacts at 75%.
    let mut record = thread.record().clone();
    record.last_prompt_tokens = 800;
    thread.record = Some(record);
    let run = thread.slice(
        vec![user("m9", "and now?")],
        vec![Ok(text("the summary")), Ok(text("answer"))],
    );
    assert_eq!(run.asked.len(), 2);
    assert_eq!(
        run.asked[0].system,
        crate::engine::compaction::SUMMARY_SYSTEM
    );
    assert!(run.asked[0].tools.is_empty());
    assert!(run.asked[0].history.last().unwrap().contains("Summarize"));
    assert!(run.asked[1].tools.contains(&"sleep".to_owned()));
    assert_eq!(run.asked[1].history[0], "summary: the summary");
    assert!(run.asked[1].history.len() < thread.history().len());
    assert!(thread.record().latest_summary.is_some());
}

#[test]
fn a_slice_over_the_window_from_the_newest_summary_is_the_slice_over_the_whole_history() {
    let mut whole = Thread::with(Limits::default(), 1_000);
    let mut window = Thread::with(Limits::default(), 1_000);
    window.windowed = true;
    let mut compactions = 0;
    for i in 0..14 {
        let compact = i % 4 == 3;
        let mut answers = Vec::new();
        if compact {
            // The last prompt used 80% of the window; the agent compacts at 75%.
            for thread in [&mut whole, &mut window] {
                let mut record = thread.record().clone();
                record.last_prompt_tokens = 800;
                thread.record = Some(record);
            }
            answers.push(Ok(text(&format!("summary {i}"))));
        }
        if i % 3 == 1 {
            // A call answered within the turn, so cuts have calls to respect.
            answers.push(Ok(calls(&[("sleep", json!({"seconds": 0}))])));
        }
        answers.push(Ok(text(&format!("reply {i}"))));
        let input = || vec![user(&format!("m{i}"), &format!("message {i}"))];
        let a = whole.slice(input(), answers.clone());
        let b = window.slice(input(), answers);
        assert_eq!(
            a.asked, b.asked,
            "slice {i}: the model was asked differently"
        );
        assert_eq!(whole.history(), window.history(), "slice {i}");
        assert_eq!(whole.record(), window.record(), "slice {i}");
        if compact {
            compactions += 1;
            let start = window.record().view_start() as usize;
            assert!(start > 0, "slice {i}: the thread was not compacted");
            assert_eq!(
                b.asked.last().unwrap().history[0],
                format!("summary: summary {i}")
            );
        }
    }
    assert_eq!(compactions, 3);
    assert!(
        window.record().view_start() > 10,
        "{:?}",
        window.record().latest_summary
    );
}
