//! `contract`: the wire contract (`ssegate::contract`) as one frozen-shape object, and `codeFor`.
//! Nothing here is a literal: every value is the library's.

use napi::Result;
use napi_derive::napi;
use ssegate::contract::{self, Code, Kind, Outcome, data, method};
use ssegate::message::RpcKind;
use ssegate::resume::{Failure, RefusalKind, Restart, Skip};
use ssegate::sse::DecodeError;

use crate::numbers::invalid;

/// One error code of the contract.
#[napi(object)]
pub struct ContractCode {
    /// The JSON-RPC error code (e.g. -32050).
    pub value: i32,
    /// Its word (e.g. `"outcome-unknown"`).
    pub word: String,
    /// The error's `message`.
    pub message: String,
}

/// The keys of an error's `data`.
#[napi(object)]
pub struct ContractDataKeys {
    pub kind: String,
    pub outcome: String,
    pub method: String,
    pub reason: String,
    pub refusal: String,
    pub status: String,
}

/// The wire contract: codes, words, default limits (bytes, counts) and durations (seconds).
#[napi(object)]
pub struct Contract {
    pub codes: Vec<ContractCode>,
    pub kinds: Vec<String>,
    pub outcomes: Vec<String>,
    pub tools_call: String,
    pub data: ContractDataKeys,
    #[napi(js_name = "DEFAULT_MAX_EVENT")]
    pub default_max_event: f64,
    #[napi(js_name = "DEFAULT_MAX_LINE")]
    pub default_max_line: f64,
    #[napi(js_name = "DEFAULT_MAX_FIELD")]
    pub default_max_field: f64,
    #[napi(js_name = "DEFAULT_MAX_BLOCK")]
    pub default_max_block: f64,
    #[napi(js_name = "DEFAULT_MAX_JSON_BODY")]
    pub default_max_json_body: f64,
    #[napi(js_name = "DEFAULT_MAX_ERROR_BODY")]
    pub default_max_error_body: f64,
    #[napi(js_name = "DEFAULT_MAX_RESUMES")]
    pub default_max_resumes: f64,
    #[napi(js_name = "DEFAULT_MAX_STALLED_RESUMES")]
    pub default_max_stalled_resumes: f64,
    #[napi(js_name = "DEFAULT_MAX_RECONNECT_ATTEMPTS")]
    pub default_max_reconnect_attempts: f64,
    #[napi(js_name = "DEFAULT_CALL_TIMEOUT")]
    pub default_call_timeout: f64,
    #[napi(js_name = "DEFAULT_CONNECT_TIMEOUT")]
    pub default_connect_timeout: f64,
    #[napi(js_name = "DEFAULT_REPLAY_TIMEOUT")]
    pub default_replay_timeout: f64,
    #[napi(js_name = "DEFAULT_IDLE_TIMEOUT")]
    pub default_idle_timeout: f64,
    #[napi(js_name = "DEFAULT_MAX_DELAY")]
    pub default_max_delay: f64,
    #[napi(js_name = "DEFAULT_MIN_DELAY")]
    pub default_min_delay: f64,
    #[napi(js_name = "DEFAULT_RETRY")]
    pub default_retry: f64,
    #[napi(js_name = "DEFAULT_BACKOFF")]
    pub default_backoff: f64,
    pub refusal_kinds: Vec<String>,
    pub failure_kinds: Vec<String>,
    pub restart_kinds: Vec<String>,
    pub skip_kinds: Vec<String>,
    pub decode_error_kinds: Vec<String>,
    pub rpc_kinds: Vec<String>,
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| (*s).to_owned()).collect()
}

/// The contract's values (exported as `contract` when the module loads).
pub(crate) fn contract() -> Contract {
    Contract {
        codes: Code::ALL
            .iter()
            .map(|c| ContractCode {
                value: c.value(),
                word: c.as_str().to_owned(),
                message: c.message().to_owned(),
            })
            .collect(),
        kinds: words(&Kind::ALL.map(Kind::as_str)),
        outcomes: words(&Outcome::ALL.map(Outcome::as_str)),
        tools_call: method::TOOLS_CALL.to_owned(),
        data: ContractDataKeys {
            kind: data::KIND.to_owned(),
            outcome: data::OUTCOME.to_owned(),
            method: data::METHOD.to_owned(),
            reason: data::REASON.to_owned(),
            refusal: data::REFUSAL.to_owned(),
            status: data::STATUS.to_owned(),
        },
        default_max_event: contract::DEFAULT_MAX_EVENT as f64,
        default_max_line: contract::DEFAULT_MAX_LINE as f64,
        default_max_field: contract::DEFAULT_MAX_FIELD as f64,
        default_max_block: contract::DEFAULT_MAX_BLOCK as f64,
        default_max_json_body: contract::DEFAULT_MAX_JSON_BODY as f64,
        default_max_error_body: contract::DEFAULT_MAX_ERROR_BODY as f64,
        default_max_resumes: f64::from(contract::DEFAULT_MAX_RESUMES),
        default_max_stalled_resumes: f64::from(contract::DEFAULT_MAX_STALLED_RESUMES),
        default_max_reconnect_attempts: f64::from(contract::DEFAULT_MAX_RECONNECT_ATTEMPTS),
        default_call_timeout: contract::DEFAULT_CALL_TIMEOUT.as_secs_f64(),
        default_connect_timeout: contract::DEFAULT_CONNECT_TIMEOUT.as_secs_f64(),
        default_replay_timeout: contract::DEFAULT_REPLAY_TIMEOUT.as_secs_f64(),
        default_idle_timeout: contract::DEFAULT_IDLE_TIMEOUT.as_secs_f64(),
        default_max_delay: contract::DEFAULT_MAX_DELAY.as_secs_f64(),
        default_min_delay: contract::DEFAULT_MIN_DELAY.as_secs_f64(),
        default_retry: contract::DEFAULT_RETRY.as_secs_f64(),
        default_backoff: contract::DEFAULT_BACKOFF.as_secs_f64(),
        refusal_kinds: words(&RefusalKind::WORDS),
        failure_kinds: words(&Failure::WORDS),
        restart_kinds: words(&Restart::WORDS),
        skip_kinds: words(&Skip::WORDS),
        decode_error_kinds: words(&DecodeError::WORDS),
        rpc_kinds: words(&RpcKind::WORDS),
    }
}

/// The code of the error answering a `method` request that failed with the kind `kind` (a word
/// of `contract.kinds`), whose outcome is `outcome` (a word of `contract.outcomes`).
#[napi]
pub fn code_for(method: String, kind: String, outcome: String) -> Result<i32> {
    let k = Kind::from_word(&kind).ok_or_else(|| invalid(format!("not a kind word: {kind:?}")))?;
    let o = Outcome::ALL
        .into_iter()
        .find(|o| o.as_str() == outcome)
        .ok_or_else(|| invalid(format!("not an outcome word: {outcome:?}")))?;
    Ok(Code::for_answer(&method, k, o).value())
}
