//! The server's integration tests, in one binary: each module is one area (its `//!` says
//! which), run over the router in-process against SQLite and PostgreSQL (`app_test!`), or over
//! the built `tenantry` binary where a test needs a process of its own (crash, CLI). One binary
//! links the server once, where a file per area linked it seventeen times.

#[macro_use]
mod common;

mod advisor;
mod api;
mod calendar;
mod chargeback;
mod configuration;
mod crash;
mod fleet;
mod hardening;
mod isolation;
mod notices;
mod offerings;
mod oidc;
mod pages;
mod provisioning;
mod sessions;
mod setup;
mod streams;
mod users;
