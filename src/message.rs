//! PROVISIONAL stand-in (replaced by the gate branch at merge).
#![allow(missing_docs)]
use crate::sse::Data;
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RpcId {
    Num(i64),
    Str(String),
}
impl std::fmt::Display for RpcId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RpcId::Num(n) => write!(f, "{n}"),
            RpcId::Str(s) => write!(f, "{s:?}"),
        }
    }
}
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpcKind {
    Request,
    Notification,
    Response,
    Batch,
    Other,
}
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RpcPeek {
    pub kind: RpcKind,
    pub id: Option<RpcId>,
}
#[derive(Clone, Debug)]
pub struct Message {
    data: Data,
}
impl Message {
    pub fn new(data: Data) -> Self {
        Message { data }
    }
    pub fn data(&self) -> &Data {
        &self.data
    }
    pub fn jsonrpc_peek(&self) -> RpcPeek {
        let mut v = Vec::new();
        self.data.copy_to(&mut v);
        let val: simd_json::OwnedValue = match simd_json::to_owned_value(&mut v) {
            Ok(v) => v,
            Err(_) => {
                return RpcPeek {
                    kind: RpcKind::Other,
                    id: None,
                };
            }
        };
        use simd_json::prelude::*;
        let id = val.get("id").and_then(|i| {
            i.as_i64()
                .map(RpcId::Num)
                .or_else(|| i.as_str().map(|s| RpcId::Str(s.to_string())))
        });
        let kind = if val.get("method").is_some() {
            if id.is_some() {
                RpcKind::Request
            } else {
                RpcKind::Notification
            }
        } else if val.get("result").is_some() || val.get("error").is_some() {
            RpcKind::Response
        } else {
            RpcKind::Other
        };
        RpcPeek { kind, id }
    }
}
