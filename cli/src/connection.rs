//! How the commands that speak to a live server (`probe`, `call`, `bridge`) reach it, beyond the
//! URL: headers from the environment (`${VAR}` in `--header`) and from a file (`--header-file`),
//! plain `http://` only to a loopback host (`--allow-http`), and the connect timeout.
//!
//! Proxies need no flag: the HTTP stack reads `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and
//! `NO_PROXY` (each also lowercase; the uppercase one wins) as curl does.

use std::io::Read;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use reqwest::header::{HeaderName, HeaderValue};

/// The connect timeout by default, in seconds: the contract's.
pub(crate) const DEFAULT_CONNECT_TIMEOUT_SECS: f64 =
    ssegate::contract::DEFAULT_CONNECT_TIMEOUT.as_secs_f64();

/// The largest `--header-file` read: far more than any server takes in headers.
pub(crate) const MAX_HEADER_FILE: u64 = 1 << 20;

/// `--header-file`, `--allow-http`, `--connect-timeout`: shared by `probe`, `call` and `bridge`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Connection {
    /// A file of headers sent with every request: one `Name: value` a line, `${VAR}` expanded as
    /// in --header; blank lines and lines starting with `#` are skipped. Combines with --header.
    #[arg(long, value_name = "FILE")]
    pub(crate) header_file: Option<PathBuf>,
    /// Allow plain `http://` to a host that is not loopback (127.0.0.0/8, ::1, localhost): the
    /// requests, headers and tokens included, cross the network unencrypted.
    #[arg(long)]
    pub(crate) allow_http: bool,
    /// How long a connection to the server (or the proxy) may take to open, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_CONNECT_TIMEOUT_SECS,
          value_parser = crate::client_args::seconds)]
    pub(crate) connect_timeout: f64,
}

/// The environment variable `name`, for [`expand`].
pub(crate) fn env_var(name: &str) -> Result<String, String> {
    match std::env::var(name) {
        Ok(value) if value.is_empty() => Err(format!("the environment variable {name} is empty")),
        Ok(value) => Ok(value),
        Err(std::env::VarError::NotPresent) => {
            Err(format!("the environment variable {name} is not set"))
        }
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(format!("the environment variable {name} is not UTF-8"))
        }
    }
}

/// `text` with each `${NAME}` replaced by `lookup(NAME)`, and `$${` by a literal `${`. A `$` not
/// followed by `{` stays as it is. `NAME` is letters, digits and `_`, not starting with a digit;
/// an unclosed `${` or another name is an error, as is a failed lookup (its error).
pub(crate) fn expand(
    text: &str,
    lookup: &dyn Fn(&str) -> Result<String, String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix("${") {
            out.push_str("${");
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{') {
            let end = tail
                .find('}')
                .ok_or("`${` without a closing `}` (write `$${` for a literal `${`)")?;
            let name = &tail[..end];
            let valid = name
                .chars()
                .next()
                .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
                && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric());
            if !valid {
                return Err(format!(
                    "`${{{name}}}` is not a variable name (letters, digits, `_`; write `$${{` for \
                     a literal `${{`)"
                ));
            }
            out.push_str(&lookup(name)?);
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// One header `Name: value`, the value expanded ([`expand`]); the error says what is wrong with
/// it, never the expanded value (it may be a secret).
fn header(
    line: &str,
    lookup: &dyn Fn(&str) -> Result<String, String>,
) -> Result<(HeaderName, HeaderValue), String> {
    let (name, value) = line
        .split_once(':')
        .ok_or_else(|| "expected `Name: value`".to_owned())?;
    let name: HeaderName = name.trim().parse().map_err(|e| format!("{e}"))?;
    let expanded = expand(value.trim(), lookup)?;
    let mut header_value: HeaderValue = expanded.parse().map_err(|_| {
        format!(
            "the value of {name} is not a valid header value (a control character or line break)"
        )
    })?;
    // A variable's value may be a token: it never shows in logs.
    if value.replace("$${", "").contains("${") {
        header_value.set_sensitive(true);
    }
    Ok((name, header_value))
}

/// The headers of every `--header` and of the `--header-file` lines, in that order, values
/// expanded with `lookup`; the error names the flag (and the file's line).
pub(crate) fn collect_headers(
    flags: &[String],
    file: Option<&Path>,
    lookup: &dyn Fn(&str) -> Result<String, String>,
) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    let mut headers = Vec::new();
    for h in flags {
        headers.push(header(h, lookup).map_err(|e| format!("--header {h:?}: {e}"))?);
    }
    if let Some(path) = file {
        let shown = path.display();
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_HEADER_FILE + 1).read_to_string(&mut text))
            .map_err(|e| format!("--header-file {shown}: {e}"))?;
        if text.len() as u64 > MAX_HEADER_FILE {
            return Err(format!(
                "--header-file {shown}: larger than {MAX_HEADER_FILE} bytes"
            ));
        }
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let parsed = header(line, lookup)
                .map_err(|e| format!("--header-file {shown} line {}: {e}", n + 1))?;
            headers.push(parsed);
        }
    }
    Ok(headers)
}

/// Whether `host` (as [`reqwest::Url::host_str`] writes it) is loopback: 127.0.0.0/8, `::1` (or
/// `::ffff:127.x.y.z`), or `localhost`.
pub(crate) fn is_loopback(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.to_canonical().is_loopback(),
        Err(_) => {
            let name = host.strip_suffix('.').unwrap_or(host);
            name.eq_ignore_ascii_case("localhost")
        }
    }
}

/// Refuses a plain `http://` URL to a host that is not loopback unless `allow_http`. A URL that
/// does not parse is left to the client (which says so).
pub(crate) fn check_http(url: &str, allow_http: bool) -> Result<(), String> {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return Ok(());
    };
    if allow_http || parsed.scheme() != "http" {
        return Ok(());
    }
    match parsed.host_str() {
        Some(host) if is_loopback(host) => Ok(()),
        _ => Err(format!(
            "URL {url:?}: plain http:// to a host that is not loopback (127.0.0.0/8, ::1, \
             localhost) sends every request and token unencrypted; use https://, or pass \
             --allow-http"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Result<String, String> {
        match name {
            "TOKEN" => Ok("s3cret".to_owned()),
            "EMPTY" => Err("the environment variable EMPTY is empty".to_owned()),
            other => Err(format!("the environment variable {other} is not set")),
        }
    }

    #[test]
    fn expand_replaces_variables_and_keeps_the_escape_literal() {
        assert_eq!(expand("Bearer ${TOKEN}", &vars).unwrap(), "Bearer s3cret");
        assert_eq!(expand("${TOKEN}${TOKEN}", &vars).unwrap(), "s3crets3cret");
        assert_eq!(expand("a $${TOKEN} b", &vars).unwrap(), "a ${TOKEN} b");
        assert_eq!(
            expand("$5 and $ and $TOKEN", &vars).unwrap(),
            "$5 and $ and $TOKEN"
        );
        assert_eq!(expand("end $", &vars).unwrap(), "end $");
        assert_eq!(expand("", &vars).unwrap(), "");
        // A multi-byte character next to the markers.
        assert_eq!(expand("é${TOKEN}é", &vars).unwrap(), "és3creté");
    }

    #[test]
    fn expand_refuses_an_unset_variable_a_bad_name_and_an_unclosed_brace() {
        let e = expand("Bearer ${NOPE}", &vars).unwrap_err();
        assert!(e.contains("NOPE") && e.contains("not set"), "{e}");
        assert!(expand("${EMPTY}", &vars).unwrap_err().contains("EMPTY"));
        for bad in ["${}", "${1A}", "${A-B}", "${ A}"] {
            let e = expand(bad, &vars).unwrap_err();
            assert!(e.contains("not a variable name"), "{bad}: {e}");
        }
        let e = expand("x ${TOKEN", &vars).unwrap_err();
        assert!(e.contains("closing"), "{e}");
    }

    #[test]
    fn the_header_file_skips_comments_and_blank_lines_and_names_the_bad_line() {
        let dir = std::env::temp_dir().join(format!("ssegate-headers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("headers");
        std::fs::write(
            &file,
            "# a comment\n\nX-Api-Key: ${TOKEN}\r\n   # indented comment\nX-Plain: a $${b}\n",
        )
        .unwrap();
        let flags = vec!["X-First: 1".to_owned()];
        let headers = collect_headers(&flags, Some(&file), &vars).unwrap();
        let shown: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        assert_eq!(
            shown,
            [
                ("x-first".to_owned(), "1".to_owned()),
                ("x-api-key".to_owned(), "s3cret".to_owned()),
                ("x-plain".to_owned(), "a ${b}".to_owned()),
            ]
        );
        assert!(
            headers[1].1.is_sensitive(),
            "an expanded value is marked sensitive"
        );
        assert!(!headers[2].1.is_sensitive());

        std::fs::write(&file, "X-Ok: 1\n\nX-Key: ${MISSING}\n").unwrap();
        let e = collect_headers(&[], Some(&file), &vars).unwrap_err();
        assert!(
            e.starts_with(&format!("--header-file {} line 3:", file.display()))
                && e.contains("MISSING"),
            "{e}"
        );
        std::fs::write(&file, "no colon here\n").unwrap();
        let e = collect_headers(&[], Some(&file), &vars).unwrap_err();
        assert!(e.contains("line 1") && e.contains("Name: value"), "{e}");

        let e = collect_headers(&["X-Key: ${MISSING}".to_owned()], None, &vars).unwrap_err();
        assert!(
            e.starts_with("--header \"X-Key: ${MISSING}\"") && e.contains("MISSING"),
            "{e}"
        );

        let e = collect_headers(&[], Some(&dir.join("absent")), &vars).unwrap_err();
        assert!(e.starts_with("--header-file "), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_header_file_over_the_limit_is_refused() {
        let file = std::env::temp_dir().join(format!("ssegate-big-headers-{}", std::process::id()));
        let line = "X-Pad: 0123456789abcdef\n";
        let lines = usize::try_from(MAX_HEADER_FILE).unwrap() / line.len() + 1;
        std::fs::write(&file, line.repeat(lines)).unwrap();
        let e = collect_headers(&[], Some(&file), &vars).unwrap_err();
        assert!(e.contains("larger than"), "{e}");
        std::fs::write(&file, line.repeat(lines - 2)).unwrap();
        assert_eq!(
            collect_headers(&[], Some(&file), &vars).unwrap().len(),
            lines - 2
        );
        std::fs::remove_file(&file).unwrap();
    }

    #[test]
    fn an_expanded_value_that_is_no_header_value_is_refused_without_showing_it() {
        let lookup = |_: &str| Ok("tok\nS3CRET".to_owned());
        let e = collect_headers(&["X-Key: ${A}".to_owned()], None, &lookup).unwrap_err();
        assert!(
            e.contains("not a valid header value") && !e.contains("S3CRET"),
            "{e}"
        );
    }

    #[test]
    fn plain_http_is_for_loopback_hosts_unless_allowed() {
        for ok in [
            "http://127.0.0.1:8080/mcp",
            "http://127.9.8.7/mcp",
            "http://[::1]:1/mcp",
            "http://[::ffff:127.0.0.1]/mcp",
            "http://localhost:3000/mcp",
            "http://LOCALHOST./mcp",
            "https://mcp.example.com/mcp",
            "https://10.0.0.1/mcp",
        ] {
            check_http(ok, false).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for refused in [
            "http://mcp.example.com/mcp",
            "http://10.0.0.1/mcp",
            "http://128.0.0.1/mcp",
            "http://[::2]/mcp",
            "http://localhost.example.com/mcp",
            "http://0.0.0.0/mcp",
        ] {
            let e = check_http(refused, false).unwrap_err();
            assert!(e.contains("--allow-http"), "{refused}: {e}");
            check_http(refused, true).unwrap();
        }
    }
}
