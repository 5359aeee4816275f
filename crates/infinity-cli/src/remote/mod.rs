//! `infinity remote`: a machine that takes the `remote` category's commands
//! (`infinity remote connect`, [`client`]) and a check of what an agent's rules allow
//! ([`check`]). The server side (the routes and the embedded hub) is
//! [`infinity_server::remotes`].

pub mod check;
pub mod client;
