//! Behaviour tests of the core runtime on the embedded host, one file per behaviour. Time is
//! tokio's paused clock: sleeps of hours pass at once and timestamps stay exact.

mod harness;

mod agent_tool;
mod catalog;
mod children;
mod compaction;
mod cost;
mod crash;
mod deadline;
mod dedup;
mod dependencies;
mod empty_messages;
mod events;
mod finish;
mod idle;
mod limits;
mod loops;
mod memory;
mod numbering;
mod parallel_calls;
mod people;
mod plan;
mod restart;
mod retries;
mod schedules;
mod skills;
mod sleep;
mod sleep_until;
mod tool_servers;
mod tree;
mod use_model;
mod waiting;
mod wake_if;
mod while_busy;
mod widget;
