//! The embedded runtime's clock: wall time advanced by tokio's clock.
//!
//! Reading time through tokio means a test that pauses tokio's clock
//! (`#[tokio::test(start_paused = true)]`) sees hours pass in an instant, with timestamps, due
//! times and the timer wheel all agreeing.

use jiff::{SignedDuration, Timestamp};
use tokio::time::Instant;

/// Wall time as seen by the embedded runtime.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base_wall: Timestamp,
    base: Instant,
}

impl Clock {
    /// A clock that reads the system time now and advances with tokio's clock.
    pub fn system() -> Self {
        Self::starting_at(Timestamp::now())
    }

    /// A clock that reads `start` now and advances with tokio's clock.
    pub fn starting_at(start: Timestamp) -> Self {
        Self {
            base_wall: start,
            base: Instant::now(),
        }
    }

    /// The current time.
    pub fn now(&self) -> Timestamp {
        let elapsed = SignedDuration::try_from(self.base.elapsed()).unwrap_or(SignedDuration::MAX);
        self.base_wall
            .checked_add(elapsed)
            .unwrap_or(Timestamp::MAX)
    }

    /// The tokio instant at which the wall time reaches `due`.
    pub fn instant_at(&self, due: Timestamp) -> Instant {
        let ahead = due.duration_since(self.now());
        let now = Instant::now();
        match std::time::Duration::try_from(ahead) {
            Ok(d) => now
                .checked_add(d)
                .unwrap_or(now + std::time::Duration::from_secs(86_400 * 365 * 30)),
            Err(_) => now, // due is in the past
        }
    }
}
