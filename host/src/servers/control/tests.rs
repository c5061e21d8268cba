//! Each engine's calls against a stand-in server on loopback that answers as that engine
//! does (the routes and statuses of the upstream files named in `engines`).

use std::sync::{Arc, Mutex};

use axum::extract::{Path, RawQuery, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use super::engines::{Engine, Refusal};
use super::http::Http;
use super::*;

/// What a stand-in server was asked, in order.
type Calls = Arc<Mutex<Vec<String>>>;

/// Serves `app` on a free loopback port: its root URL.
async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn log(calls: &Calls, what: String) {
    calls.lock().unwrap().push(what);
}

/// SGLang: known by /get_model_info; /flush_cache refuses twice (requests still running).
async fn sglang(calls: Calls) -> String {
    let app = Router::new()
        .route(
            "/get_model_info",
            get(|| async { Json(json!({"model_path": "m", "is_generation": true})) }),
        )
        .route(
            "/flush_cache",
            post(
                |State(calls): State<Calls>, headers: HeaderMap| async move {
                    // The run's API key goes along as a bearer token.
                    match headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) {
                        Some("Bearer k") => log(&calls, "flush".into()),
                        other => log(&calls, format!("flush with authorization {other:?}")),
                    }
                    match calls.lock().unwrap().len() {
                        1 | 2 => StatusCode::BAD_REQUEST,
                        _ => StatusCode::OK,
                    }
                },
            ),
        )
        .route(
            "/start_profile",
            post(|State(calls): State<Calls>| async move {
                log(&calls, "start".into());
                "Start profiling.\n"
            }),
        )
        .with_state(calls);
    serve(app).await
}

/// llama.cpp: known by /props; two slots; erase answered 501 unless `slot_actions`.
async fn llama_cpp(calls: Calls, slot_actions: bool) -> String {
    let erase = move |State(calls): State<Calls>, Path(id): Path<u64>, RawQuery(q): RawQuery| async move {
        log(&calls, format!("{id}?{}", q.unwrap_or_default()));
        match slot_actions {
            true => (StatusCode::OK, Json(json!({"id_slot": id, "n_erased": 9}))),
            false => (
                StatusCode::NOT_IMPLEMENTED,
                Json(json!({"error": {"code": 501, "type": "not_supported_error"}})),
            ),
        }
    };
    let app = Router::new()
        .route(
            "/props",
            get(|| async { Json(json!({"total_slots": 2, "model_path": "m.gguf"})) }),
        )
        .route(
            "/slots",
            get(|| async { Json(json!([{"id": 0, "n_ctx": 4096}, {"id": 1, "n_ctx": 4096}])) }),
        )
        .route("/slots/{id}", post(erase))
        .with_state(calls);
    serve(app).await
}

fn http() -> Http {
    Http::new(Some("k")).expect("a client")
}

#[tokio::test]
async fn sglang_is_known_by_its_model_info_and_asked_to_flush_until_it_can() {
    let calls = Calls::default();
    let root = sglang(calls.clone()).await;
    let engine = Engine::detect(&http(), &root).await;
    assert_eq!(engine, Engine::SgLang);
    assert_eq!(engine.reset_prefix_cache(&http(), &root).await, Ok(()));
    assert_eq!(engine.start_profile(&http(), &root).await, Ok(()));
    assert_eq!(*calls.lock().unwrap(), ["flush", "flush", "flush", "start"]);
}

#[tokio::test]
async fn llama_cpp_is_known_by_its_props_and_every_slot_is_erased() {
    let calls = Calls::default();
    let root = llama_cpp(calls.clone(), true).await;
    let engine = Engine::detect(&http(), &root).await;
    assert_eq!(engine, Engine::LlamaCpp);
    assert_eq!(engine.reset_prefix_cache(&http(), &root).await, Ok(()));
    assert_eq!(*calls.lock().unwrap(), ["0?action=erase", "1?action=erase"]);
    assert!(matches!(
        engine.start_profile(&http(), &root).await,
        Err(Refusal::Lacks(_))
    ));
}

#[tokio::test]
async fn llama_cpp_without_slot_actions_says_which_flag_it_needs() {
    let root = llama_cpp(Calls::default(), false).await;
    let refused = Engine::LlamaCpp.reset_prefix_cache(&http(), &root).await;
    let Err(Refusal::Lacks(what)) = refused else {
        panic!("{refused:?}");
    };
    assert!(what.contains("--slot-save-path"), "{what}");
}

#[tokio::test]
async fn a_server_of_none_of_the_routes_is_taken_for_vllm_and_lacks_them() {
    let root = serve(Router::new()).await;
    let engine = Engine::detect(&http(), &root).await;
    assert_eq!(engine, Engine::VllmLike);
    let reset = engine.reset_prefix_cache(&http(), &root).await;
    let Err(Refusal::Lacks(what)) = reset else {
        panic!("{reset:?}");
    };
    assert!(what.contains("VLLM_SERVER_DEV_MODE=1"), "{what}");
    let profile = engine.start_profile(&http(), &root).await;
    let Err(Refusal::Lacks(what)) = profile else {
        panic!("{profile:?}");
    };
    assert!(what.contains("VLLM_TORCH_PROFILER_DIR"), "{what}");
}

#[tokio::test]
async fn a_server_that_is_not_there_is_a_failure_not_a_lack() {
    let root = format!("http://127.0.0.1:{}", crate_free_port());
    let reset = Engine::VllmLike.reset_prefix_cache(&http(), &root).await;
    assert!(matches!(reset, Err(Refusal::Failed(_))), "{reset:?}");
}

/// A loopback port nothing listens on a moment later.
fn crate_free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[test]
fn the_root_drops_a_trailing_v1_and_each_server_is_asked_once() {
    assert_eq!(server_root("http://h:8000/v1/"), "http://h:8000");
    assert_eq!(server_root(" https://h/x/v1 "), "https://h/x");
    let control = ServerControl::new(
        &["http://a:1/v1", "http://a:1", "http://b:2/"],
        None,
        Some(ResetWhen::Run),
        vec![],
    )
    .expect("a client");
    let roots: Vec<&str> = control.targets.iter().map(|t| t.root.as_str()).collect();
    assert_eq!(roots, ["http://a:1", "http://b:2"]);
}

#[tokio::test]
async fn an_interrupt_ends_the_wait_for_a_call_that_does_not_answer() {
    let (raise, interrupt) = watch::channel(false);
    let control = ServerControl::default().stopped_by(interrupt);
    let answered = control.unless_interrupted(async { 7 }).await;
    assert_eq!(answered, Some(7));
    let hung = control.unless_interrupted(std::future::pending::<()>());
    let raising = async {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        raise.send(true).expect("a receiver");
    };
    let (ended, ()) = tokio::join!(
        tokio::time::timeout(std::time::Duration::from_secs(5), hung),
        raising
    );
    assert_eq!(ended, Ok(None), "the interrupt ended the wait");
    assert!(*control.interrupt.as_ref().expect("stopped_by").borrow());
}
