//! What the commands that speak to a live server (`probe`, `call`) parse alike.

use std::path::Path;

use ssegate::client::ClientConfig;

/// A client configuration with the `--header` values (`Name: value`, repeatable) and the `--cacert`
/// PEM file (certificates trusted besides the platform's roots); the error names the flag.
pub(crate) fn client_config(
    headers: &[String],
    cacert: Option<&Path>,
) -> Result<ClientConfig, String> {
    let mut client = ClientConfig::default();
    for h in headers {
        let (name, value) = h
            .split_once(':')
            .ok_or_else(|| format!("--header {h:?}: expected `Name: value`"))?;
        let name = name
            .trim()
            .parse()
            .map_err(|e| format!("--header {h:?}: {e}"))?;
        let value = value
            .trim()
            .parse()
            .map_err(|e| format!("--header {h:?}: {e}"))?;
        client.header(name, value);
    }
    if let Some(path) = cacert {
        let pem = std::fs::read(path).map_err(|e| format!("--cacert {}: {e}", path.display()))?;
        client.root_certificate_pem(&pem);
    }
    Ok(client)
}

/// A positive, finite number of seconds (fractions allowed), for `--timeout`.
pub(crate) fn seconds(text: &str) -> Result<f64, String> {
    let secs: f64 = text.parse().map_err(|e| format!("{e}"))?;
    if secs.is_finite() && secs > 0.0 && secs < 1e9 {
        Ok(secs)
    } else {
        Err("expected a positive number of seconds".to_owned())
    }
}
