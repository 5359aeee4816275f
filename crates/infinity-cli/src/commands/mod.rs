//! The commands whose whole body is their own: one file each (the others are modules of their
//! own subject: `agents`, `aws`, `migrate`, `people`, ...).

pub(crate) mod chat;
pub(crate) mod run;
pub(crate) mod serve;
pub(crate) mod status;
pub(crate) mod threads;
pub(crate) mod tools;
