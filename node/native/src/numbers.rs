//! JavaScript numbers in, checked.

use napi::{Error, Result, Status};

/// The largest integer a JavaScript number holds exactly.
const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// A count (a limit in bytes, a number of ids): an integer from 0 to 2**53 - 1.
pub(crate) fn count(name: &str, value: f64) -> Result<usize> {
    if value.is_finite() && value.fract() == 0.0 && (0.0..=MAX_SAFE).contains(&value) {
        usize::try_from(value as u64).map_err(|_| invalid(format!("{name} is too large: {value}")))
    } else {
        Err(invalid(format!(
            "{name} must be an integer from 0 to 2**53 - 1, got {value}"
        )))
    }
}

/// A small count (attempts, resumes): an integer from 0 to 2**32 - 1.
pub(crate) fn count32(name: &str, value: f64) -> Result<u32> {
    let n = count(name, value)?;
    u32::try_from(n).map_err(|_| invalid(format!("{name} must be at most 2**32 - 1, got {value}")))
}

pub(crate) fn invalid(message: String) -> Error {
    Error::new(Status::InvalidArg, message)
}
