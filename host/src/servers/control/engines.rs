//! Which engine a target runs, and each engine's own calls. Routes as their servers
//! define them:
//! - vLLM: `POST /reset_prefix_cache` (vllm/entrypoints/serve/dev/cache/api_router.py,
//!   attached only with `VLLM_SERVER_DEV_MODE=1`), `POST /start_profile` and
//!   `/stop_profile` (vllm/entrypoints/serve/profile/api_router.py, attached only with
//!   `VLLM_TORCH_PROFILER_DIR` or `VLLM_TORCH_CUDA_PROFILE` set). The simulator serves
//!   the same routes.
//! - SGLang: `/flush_cache` (400 while requests run or wait), `/start_profile`,
//!   `/stop_profile` (python/sglang/srt/entrypoints/http_server.py); known by
//!   `GET /get_model_info`.
//! - llama.cpp: `GET /slots`, then `POST /slots/{id}?action=erase` for each (501 unless
//!   the server was started with `--slot-save-path`); no profiler route
//!   (tools/server/server.cpp); known by `GET /props`.

use std::time::Duration;

use reqwest::Method;

use super::http::{Answer, Http};

/// Longest wait for each question that tells the engine (`/props`, `/get_model_info`): a
/// server answers them from memory, at once.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest wait for a reset or a profiler's start (each call of them).
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for a profiler to stop: vLLM writes its trace before it answers (its own
/// benchmark waits hours), which takes longer the longer the phase; the wait is said on
/// stderr after a second, and Ctrl-C cuts it.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// SGLang refuses to flush while requests run or wait: tries, and the pause between them.
const FLUSH_TRIES: u32 = 10;
const FLUSH_PAUSE: Duration = Duration::from_millis(500);

/// The engine behind a target, as far as its routes tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Engine {
    LlamaCpp,
    SgLang,
    /// vLLM, the simulator, or a server unknown: vLLM's routes are tried.
    VllmLike,
}

/// Why a control call did not happen.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum Refusal {
    /// The server has no such route or action: what it lacks, in words.
    #[error("{0}")]
    Lacks(String),
    /// The call failed: why.
    #[error("{0}")]
    Failed(String),
}

impl Engine {
    /// llama.cpp answers `/props` with its slots, SGLang `/get_model_info` with its model
    /// path; anything else is taken for vLLM.
    pub(super) async fn detect(http: &Http, root: &str) -> Engine {
        let has = |answer: Result<Answer, String>, keys: &[&str]| {
            answer
                .ok()
                .filter(Answer::ok)
                .and_then(|a| a.json())
                .is_some_and(|j| keys.iter().any(|k| j.get(k).is_some()))
        };
        let props = http.call(Method::GET, root, "/props", PROBE_TIMEOUT).await;
        if has(props, &["total_slots", "default_generation_settings"]) {
            return Engine::LlamaCpp;
        }
        let info = http
            .call(Method::GET, root, "/get_model_info", PROBE_TIMEOUT)
            .await;
        if has(info, &["model_path"]) {
            return Engine::SgLang;
        }
        Engine::VllmLike
    }

    /// Empties the server's prefix cache.
    pub(super) async fn reset_prefix_cache(self, http: &Http, root: &str) -> Result<(), Refusal> {
        match self {
            Engine::VllmLike => {
                let answer = post(http, root, "/reset_prefix_cache", CALL_TIMEOUT).await?;
                expect_ok(&answer, "POST /reset_prefix_cache", || {
                    "has no POST /reset_prefix_cache (vLLM serves it only when started with \
                     VLLM_SERVER_DEV_MODE=1; nor SGLang's /flush_cache or llama.cpp's /slots)"
                        .into()
                })
            }
            Engine::SgLang => flush_sglang(http, root).await,
            Engine::LlamaCpp => erase_slots(http, root).await,
        }
    }

    /// Starts the server's profiler.
    pub(super) async fn start_profile(self, http: &Http, root: &str) -> Result<(), Refusal> {
        let lacks = match self {
            Engine::LlamaCpp => {
                return Err(Refusal::Lacks(
                    "is llama.cpp, which has no profiler route".into(),
                ))
            }
            Engine::SgLang => "is SGLang but has no POST /start_profile",
            Engine::VllmLike => {
                "has no POST /start_profile (vLLM serves it only when started with \
                 VLLM_TORCH_PROFILER_DIR set)"
            }
        };
        let answer = post(http, root, "/start_profile", CALL_TIMEOUT).await?;
        expect_ok(&answer, "POST /start_profile", || lacks.into())
    }

    /// Stops the profiler [`Engine::start_profile`] started.
    pub(super) async fn stop_profile(self, http: &Http, root: &str) -> Result<(), Refusal> {
        let answer = post(http, root, "/stop_profile", STOP_TIMEOUT).await?;
        expect_ok(&answer, "POST /stop_profile", || {
            "has no POST /stop_profile".into()
        })
    }
}

async fn post(http: &Http, root: &str, path: &str, timeout: Duration) -> Result<Answer, Refusal> {
    http.call(Method::POST, root, path, timeout)
        .await
        .map_err(|e| Refusal::Failed(format!("POST {path}: {e}")))
}

/// 2xx is done, unless it is an event stream or a web page (a server that answers every
/// path alike has no such route either); 404 and 405 mean the route is not there;
/// anything else failed.
fn expect_ok(answer: &Answer, what: &str, lacks: impl FnOnce() -> String) -> Result<(), Refusal> {
    match answer.status {
        _ if answer.ok() => match answer.stray() {
            None => Ok(()),
            Some(stray) => Err(Refusal::Lacks(format!(
                "answers {what} with {stray}, not as a control route"
            ))),
        },
        404 | 405 => Err(Refusal::Lacks(lacks())),
        status => Err(Refusal::Failed(format!(
            "{what} answered HTTP {status}: {}",
            answer.excerpt()
        ))),
    }
}

/// SGLang's `/flush_cache` answers 400 while requests run or wait (the last phase's cut
/// requests may still be ending): it is asked again for a few seconds.
async fn flush_sglang(http: &Http, root: &str) -> Result<(), Refusal> {
    let mut answer = post(http, root, "/flush_cache", CALL_TIMEOUT).await?;
    for _ in 1..FLUSH_TRIES {
        if answer.status != 400 {
            break;
        }
        tokio::time::sleep(FLUSH_PAUSE).await;
        answer = post(http, root, "/flush_cache", CALL_TIMEOUT).await?;
    }
    expect_ok(&answer, "POST /flush_cache", || {
        "is SGLang but has no /flush_cache".into()
    })
}

/// llama.cpp keeps a prompt per slot: every slot is erased.
async fn erase_slots(http: &Http, root: &str) -> Result<(), Refusal> {
    let listing = http
        .call(Method::GET, root, "/slots", CALL_TIMEOUT)
        .await
        .map_err(|e| Refusal::Failed(format!("GET /slots: {e}")))?;
    if matches!(listing.status, 404 | 501) {
        return Err(Refusal::Lacks(
            "is llama.cpp with its /slots endpoint off (started with --no-slots)".into(),
        ));
    }
    expect_ok(&listing, "GET /slots", String::new)?;
    let ids = slot_ids(&listing).ok_or_else(|| {
        Refusal::Failed(format!(
            "GET /slots is not a list of slots: {}",
            listing.excerpt()
        ))
    })?;
    for id in ids {
        let path = format!("/slots/{id}?action=erase");
        let answer = post(http, root, &path, CALL_TIMEOUT).await?;
        if answer.status == 501 {
            return Err(Refusal::Lacks(
                "is llama.cpp and refuses slot actions: start llama-server with \
                 --slot-save-path DIR"
                    .into(),
            ));
        }
        expect_ok(&answer, &format!("POST {path}"), || {
            "is llama.cpp without slot actions".into()
        })?;
    }
    Ok(())
}

/// The `id` of every slot in llama.cpp's `GET /slots` answer.
fn slot_ids(listing: &Answer) -> Option<Vec<u64>> {
    let json = listing.json()?;
    json.as_array()?
        .iter()
        .map(|slot| slot.get("id")?.as_u64())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: &str) -> Answer {
        Answer {
            status,
            content_type: "application/json".into(),
            body: body.into(),
        }
    }

    #[test]
    fn a_missing_route_is_lacking_and_another_status_a_failure() {
        let lacks = || "lacks it".to_string();
        assert_eq!(expect_ok(&answer(200, ""), "/x", lacks), Ok(()));
        assert_eq!(
            expect_ok(&answer(404, "Not Found"), "/x", lacks),
            Err(Refusal::Lacks("lacks it".into()))
        );
        let stream = Answer {
            content_type: "text/event-stream; charset=utf-8".into(),
            ..answer(200, "data: {}")
        };
        assert_eq!(
            expect_ok(&stream, "/x", lacks),
            Err(Refusal::Lacks(
                "answers /x with text/event-stream, not as a control route".into()
            ))
        );
        assert_eq!(
            expect_ok(&answer(500, "boom\n  at line 3"), "/x", lacks),
            Err(Refusal::Failed(
                "/x answered HTTP 500: boom at line 3".into()
            ))
        );
    }

    #[test]
    fn slot_ids_come_from_llama_cpp_s_listing_and_anything_else_is_none() {
        let listing = r#"[{"id":0,"n_ctx":4096,"is_processing":false},{"id":3}]"#;
        assert_eq!(slot_ids(&answer(200, listing)), Some(vec![0, 3]));
        for bad in ["{}", "[{\"id\":-1}]", "[{\"n_ctx\":1}]", "not json", "[1]"] {
            assert_eq!(slot_ids(&answer(200, bad)), None, "{bad}");
        }
    }
}
