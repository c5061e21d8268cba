//! `runner sim`: the simulated OpenAI-compatible server on loopback, until Ctrl-C.

use std::sync::Arc;

use anyhow::{Context, Result};

use super::{load_tokenizer, runtime};
use crate::commands::cli::SimCommand;

pub fn sim(a: SimCommand) -> Result<()> {
    // 10,000 open streams need as many sockets: lift the soft limit to the hard one.
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let tokenizer = load_tokenizer(&a.tokenizer)?;
    let mut config = a.sim.to_config()?;
    let counter = tokenizer.clone();
    config.prompt_token_counter = Some(Arc::new(move |text: &str| counter.count(text)));
    let rt = runtime()?;
    rt.block_on(async move {
        let listener = crate::servers::sim::bind(a.port)
            .with_context(|| format!("cannot listen on 127.0.0.1:{}", a.port))?;
        crate::errln!(
            "simulated OpenAI-compatible server ({} profile) on http://127.0.0.1:{}",
            a.sim.profile,
            a.port
        );
        tokio::select! {
            r = crate::servers::sim::serve(listener, config) => r.context("the simulated server stopped"),
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    })
}
