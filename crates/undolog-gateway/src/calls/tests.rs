use std::sync::Arc;

use serde_json::json;
use undolog_store::SqliteStore;
use undolog_types::{Args, OrgId, SessionId};

use super::{Caller, ToolCall};
use crate::{Gateway, GatewayConfig, runs::CallSession};

/// A gateway with no upstreams on an in-memory store.
async fn gateway() -> Arc<Gateway> {
    let store = Arc::new(SqliteStore::in_memory().await.unwrap());
    Gateway::with_store(GatewayConfig::from_toml("").unwrap(), store)
        .await
        .unwrap()
}

/// A future is copied whole wherever it is moved: into the future that awaits it, into a
/// spawned task. The deep part of a call (classified, intercepted, executed, recorded) is
/// boxed once, and so is the catalog refresh a lookup may need, so the layers above them
/// (traces, credentials, the stateless request's task) each copy under 2 KiB, not the 48 KiB
/// a call's future once weighed, or the 6.4 KiB it weighed with the refresh inline.
#[tokio::test]
async fn a_calls_future_is_small_enough_to_move_on_every_call() {
    let gateway = gateway().await;
    let call = ToolCall {
        caller: "agent".into(),
        presented: Default::default(),
        org: OrgId::new("acme").unwrap(),
        session: CallSession::Named(SessionId::new("s").unwrap()),
        tool: "transfer".into(),
        args: Args::try_from(json!({"amount": 1})).unwrap(),
        idempotency_key: None,
        step: None,
        meta: None,
        round: None,
        wait: None,
    };
    let caller = Caller::default();
    let future = gateway.call_tool(call, &caller);
    let size = std::mem::size_of_val(&future);
    assert!(size <= 2 * 1024, "a call's future is {size} bytes");
}

/// Every request awaits its credential's check in its middleware's future, which is boxed
/// and copied per request; the rare parts (a token to verify, a key to ask the engine
/// about) are boxed apart, so the check weighs a few hundred bytes.
#[tokio::test]
async fn a_credentials_check_is_small_enough_to_carry_on_every_request() {
    let gateway = gateway().await;
    let headers = http::HeaderMap::new();
    let future = gateway.authenticate(&headers);
    let size = std::mem::size_of_val(&future);
    assert!(size <= 1024, "a credential's check is {size} bytes");
}

/// The layers around a store operation (its timing, its trace span) add a few bytes to the
/// future they wrap, not a copy of it each.
#[tokio::test]
async fn a_store_operations_wrappers_do_not_copy_the_future_they_wrap() {
    let gateway = gateway().await;
    let work = async {
        let held = [7u8; 1024];
        tokio::task::yield_now().await;
        std::hint::black_box(held)[0]
    };
    let bare = std::mem::size_of_val(&work);
    let wrapped = gateway.store_op("intercept", work);
    let size = std::mem::size_of_val(&wrapped);
    assert!(
        size <= bare + 256,
        "{bare} bytes of work weigh {size} once wrapped"
    );
    assert_eq!(wrapped.await, 7, "the wrapped work's answer");
}
