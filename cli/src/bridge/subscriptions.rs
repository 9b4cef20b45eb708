//! A 2026-07-28 host's `subscriptions/listen`, answered by the bridge: over stdio every
//! subscription shares the one channel, so the notifications the bridge relays are tagged with the
//! id of each host subscription that asked for them, after that subscription's acknowledgement.
//!
//! The bridge keeps one notification stream of its own open to the server (the `GET` stream, or
//! `subscriptions/listen` on 2026-07-28) asking for the list changes; those are the kinds a host
//! subscription is granted. A host on a 2025 revision gets every notification as the server sent
//! it.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{Map, Value, json};
// The `_meta` key naming the subscription a message belongs to.
use ssegate::contract::meta::SUBSCRIPTION_ID;

/// The acknowledgement a subscription's first message must be.
pub(super) const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

/// The filter key of each notification a host subscription can be granted.
const GRANTED: &[(&str, &str)] = &[
    ("notifications/tools/list_changed", "toolsListChanged"),
    ("notifications/prompts/list_changed", "promptsListChanged"),
    (
        "notifications/resources/list_changed",
        "resourcesListChanged",
    ),
];

/// What becomes of a server notification on its way to the host.
#[derive(Debug, PartialEq)]
pub(super) enum Route {
    /// Not for the host (the acknowledgement of the bridge's own stream, or a kind no
    /// subscription of a 2026-07-28 host asked for).
    Drop,
    /// Written as the server sent it.
    AsIs,
    /// One copy per subscription that asked for it, tagged with its id.
    Tagged(Vec<Value>),
}

/// One open subscription: the host's id for it, and the filter granted.
struct Subscription {
    id: Value,
    granted: Map<String, Value>,
}

/// The host's open subscriptions, by the id's key.
#[derive(Default)]
pub(super) struct Subscriptions {
    open: Mutex<HashMap<String, Subscription>>,
}

impl Subscriptions {
    /// Opens the host's subscription `id` (`key` its map key) asking for `requested` (the
    /// request's `notifications` filter): the acknowledgement to write.
    pub(super) fn open(&self, key: String, id: Value, requested: &Value) -> Value {
        let granted: Map<String, Value> = GRANTED
            .iter()
            .filter(|(_, name)| requested[*name] == true)
            .map(|(_, name)| ((*name).to_owned(), Value::Bool(true)))
            .collect();
        let ack = json!({"jsonrpc": "2.0", "method": ACKNOWLEDGED,
                         "params": {"notifications": granted, "_meta": {SUBSCRIPTION_ID: id}}});
        self.open
            .lock()
            .expect("subscriptions lock")
            .insert(key, Subscription { id, granted });
        ack
    }

    /// Closes the subscription `key`; whether it was open.
    pub(super) fn close(&self, key: &str) -> bool {
        self.open
            .lock()
            .expect("subscriptions lock")
            .remove(key)
            .is_some()
    }

    /// Where a server notification of `method` goes, for a host on 2026-07-28 (`host_2026`) or on
    /// a 2025 revision.
    pub(super) fn route(&self, method: &str, host_2026: bool) -> Route {
        if method == ACKNOWLEDGED {
            return Route::Drop;
        }
        let Some((_, name)) = GRANTED.iter().find(|(m, _)| *m == method) else {
            return Route::AsIs;
        };
        if !host_2026 {
            return Route::AsIs;
        }
        let open = self.open.lock().expect("subscriptions lock");
        let ids: Vec<Value> = open
            .values()
            .filter(|s| s.granted.contains_key(*name))
            .map(|s| s.id.clone())
            .collect();
        if ids.is_empty() {
            Route::Drop
        } else {
            Route::Tagged(ids)
        }
    }
}

/// `notification` tagged as a message of subscription `id`.
pub(super) fn tagged(mut notification: Value, id: Value) -> Value {
    if !notification["params"].is_object() {
        notification["params"] = json!({});
    }
    let params = &mut notification["params"];
    if !params["_meta"].is_object() {
        params["_meta"] = json!({});
    }
    params["_meta"][SUBSCRIPTION_ID] = id;
    notification
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_2026_host_gets_only_what_a_subscription_asked_for_tagged_with_its_id() {
        let subs = Subscriptions::default();
        let ack = subs.open(
            "7".into(),
            json!(7),
            &json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]}),
        );
        // Only what the bridge can honour is granted.
        assert_eq!(
            ack["params"]["notifications"],
            json!({"toolsListChanged": true})
        );
        assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], 7);
        subs.open(
            "\"s\"".into(),
            json!("s"),
            &json!({"toolsListChanged": true, "promptsListChanged": true}),
        );
        let Route::Tagged(mut ids) = subs.route("notifications/tools/list_changed", true) else {
            panic!("tagged");
        };
        ids.sort_by_key(Value::to_string);
        assert_eq!(ids, vec![json!("s"), json!(7)]);
        assert_eq!(
            subs.route("notifications/prompts/list_changed", true),
            Route::Tagged(vec![json!("s")])
        );
        // Nobody asked: never sent to a 2026 host; a 2025 host gets everything.
        assert_eq!(
            subs.route("notifications/resources/list_changed", true),
            Route::Drop
        );
        assert_eq!(
            subs.route("notifications/resources/list_changed", false),
            Route::AsIs
        );
        assert_eq!(subs.route("notifications/progress", true), Route::AsIs);
        // The server's acknowledgement of the bridge's own stream is the bridge's.
        assert_eq!(subs.route(ACKNOWLEDGED, false), Route::Drop);
        assert!(subs.close("7"));
        assert_eq!(
            subs.route("notifications/tools/list_changed", true),
            Route::Tagged(vec![json!("s")])
        );
    }

    #[test]
    fn a_tag_keeps_the_notifications_own_meta() {
        let n = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                       "params": {"_meta": {"x": 1}}});
        let t = tagged(n, json!(3));
        assert_eq!(t["params"]["_meta"], json!({"x": 1, SUBSCRIPTION_ID: 3}));
    }
}
