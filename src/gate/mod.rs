//! PROVISIONAL stand-in (replaced by the gate branch at merge).
#![allow(missing_docs)]
use crate::sse::Data;
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    Incomplete,
    Complete,
    Trailing,
    Invalid,
}
impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Incomplete => "incomplete",
            Verdict::Complete => "complete",
            Verdict::Trailing => "trailing",
            Verdict::Invalid => "invalid",
        }
    }
}
#[derive(Debug, Default)]
pub struct Gate;
impl Gate {
    pub fn new() -> Gate {
        Gate
    }
    pub fn check(&mut self, data: &Data) -> Verdict {
        let mut v = Vec::new();
        data.copy_to(&mut v);
        let t = String::from_utf8_lossy(&v).trim().to_string();
        let mut b = t.clone().into_bytes();
        if simd_json::to_borrowed_value(&mut b).is_ok() {
            return Verdict::Complete;
        }
        for cut in (1..t.len()).rev() {
            if !t.is_char_boundary(cut) {
                continue;
            }
            let mut b = t[..cut].as_bytes().to_vec();
            if simd_json::to_borrowed_value(&mut b).is_ok() {
                return Verdict::Trailing;
            }
        }
        if t.starts_with('{') || t.starts_with('[') || t.is_empty() {
            Verdict::Incomplete
        } else {
            Verdict::Invalid
        }
    }
}
