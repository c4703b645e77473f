//! The drain report (issue 30).

pub(crate) mod pods;
