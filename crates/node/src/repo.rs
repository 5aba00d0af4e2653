//! Module repositories: `anode repo serve DIR` ([`RepoServer`], tiny_http) and fetching a
//! package by name and version from one ([`fetch`], ureq; redirects and chunked bodies
//! followed, bodies bounded). A fetched package is not verified here: the node verifies its
//! signature against its own trusted keys before installing it.
//!
//! Contracts: the server answers only `GET /NAME/VERSION` and `GET /NAME-VERSION.amod` for
//! files directly in its directory whose names are package names (letters, digits, `-._+`,
//! ending in `.amod`, no `..`); everything else is 404. A response larger than
//! [`MAX_PACKAGE_BYTES`] is refused.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anode_modules::Package;

/// The largest package a fetch accepts.
pub const MAX_PACKAGE_BYTES: u64 = 16 << 20;

/// Fetches NAME VERSION from the repository at `url` and checks it is that package (not
/// verified: the node does that).
pub fn fetch(url: &str, name: &str, version: &str) -> Result<Vec<u8>, String> {
    let body = http_get(url, &format!("/{name}/{version}"))?;
    let p = Package::decode(&body).map_err(|e| format!("{url}: {e}"))?;
    if p.manifest.name != name || p.manifest.version.to_string() != version {
        return Err(format!(
            "the repository {url} answered with {} for {name}@{version}: refused",
            p.id()
        ));
    }
    Ok(body)
}

/// GETs `path` from the repository at `url` (plain http), at most [`MAX_PACKAGE_BYTES`].
pub fn http_get(url: &str, path: &str) -> Result<Vec<u8>, String> {
    if !url.starts_with("http://") {
        return Err(format!("'{url}': only http:// repositories are supported"));
    }
    let full = format!("{}{path}", url.trim_end_matches('/'));
    let agent = ureq::AgentBuilder::new()
        .timeout_connect(Duration::from_secs(5))
        .timeout(Duration::from_secs(30))
        .build();
    let resp = agent.get(&full).call().map_err(|e| match e {
        ureq::Error::Status(code, r) => format!("{full}: {code} {}", r.status_text()),
        ureq::Error::Transport(t) => format!("cannot fetch {full}: {t}"),
    })?;
    let mut body = Vec::new();
    resp.into_reader()
        .take(MAX_PACKAGE_BYTES + 1)
        .read_to_end(&mut body)
        .map_err(|e| format!("{full}: {e}"))?;
    if body.len() as u64 > MAX_PACKAGE_BYTES {
        return Err(format!(
            "{full}: the answer is larger than {MAX_PACKAGE_BYTES} bytes: refused"
        ));
    }
    Ok(body)
}

/// The package bytes `source` names: a package file, or a repository URL with `name` and
/// `version`.
pub fn package_bytes(
    source: &str,
    name: Option<&str>,
    version: Option<&str>,
) -> Result<Vec<u8>, String> {
    if source.starts_with("http://") {
        let (Some(n), Some(v)) = (name, version) else {
            return Err(format!(
                "{source}: a repository needs the module's NAME and VERSION after it"
            ));
        };
        return fetch(source, n, v);
    }
    if name.is_some() {
        return Err(format!(
            "{source}: NAME and VERSION go with a repository URL (http://...), not a package file"
        ));
    }
    let bytes = std::fs::read(source).map_err(|e| {
        format!(
            "cannot read {source} ({e}); give a .amod package (`anode module pack` and `sign` make one) or a repository URL"
        )
    })?;
    // Catch a file that is not a package here, with its name in the message.
    Package::decode(&bytes).map_err(|e| format!("{source}: {e}"))?;
    Ok(bytes)
}

/// The package `anode module pack` makes: from a built-in module's name or a directory. A
/// guest source directory without its compiled `module.wasm` gets an error saying how to
/// build it (or to use `--builtin`).
pub fn pack_source(dir: Option<&Path>, builtin: Option<&str>) -> Result<Package, String> {
    if let Some(name) = builtin {
        return anode_modules::builtin::package(name).ok_or_else(|| {
            let names: Vec<&str> = anode_modules::builtin::BUILTIN
                .iter()
                .map(|(n, _, _)| *n)
                .collect();
            format!(
                "no built-in module `{name}` (built-in: {})",
                names.join(", ")
            )
        });
    }
    let dir = dir.ok_or("give a module directory or --builtin NAME")?;
    Package::from_dir(dir).map_err(|e| e.to_string())
}

/// A module repository serving the packages of a directory over HTTP.
pub struct RepoServer {
    server: tiny_http::Server,
    dir: PathBuf,
}

impl std::fmt::Debug for RepoServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RepoServer")
            .field("dir", &self.dir)
            .finish()
    }
}

impl RepoServer {
    /// Listens on `listen` for the packages in `dir`.
    pub fn bind(dir: &Path, listen: &str) -> Result<RepoServer, String> {
        let server = tiny_http::Server::http(listen)
            .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        Ok(RepoServer {
            server,
            dir: dir.to_path_buf(),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> String {
        self.server.server_addr().to_string()
    }

    /// Answers requests until the process ends.
    pub fn run(&self) {
        for req in self.server.incoming_requests() {
            let body = package_file(req.url())
                .filter(|_| *req.method() == tiny_http::Method::Get)
                .and_then(|f| std::fs::read(self.dir.join(f)).ok());
            let resp = match body {
                Some(b) => {
                    let r = tiny_http::Response::from_data(b);
                    match tiny_http::Header::from_bytes(
                        &b"Content-Type"[..],
                        &b"application/octet-stream"[..],
                    ) {
                        Ok(h) => r.with_header(h),
                        Err(()) => r,
                    }
                }
                None => tiny_http::Response::from_data(Vec::new()).with_status_code(404),
            };
            let _ = req.respond(resp);
        }
    }
}

/// The file a request path names (`/NAME/VERSION` or `/NAME-VERSION.amod`), if it is a safe
/// package file name.
fn package_file(path: &str) -> Option<String> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let file = match parts.as_slice() {
        [n, v] => format!("{n}-{v}.amod"),
        [f] => (*f).to_string(),
        _ => return None,
    };
    let safe = file.ends_with(".amod")
        && file
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._+".contains(&b))
        && !file.contains("..");
    safe.then_some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_package_names_are_served() {
        assert_eq!(
            package_file("/null/1.0.0").as_deref(),
            Some("null-1.0.0.amod")
        );
        assert_eq!(
            package_file("/null-1.0.0.amod").as_deref(),
            Some("null-1.0.0.amod")
        );
        for bad in ["/../x/1", "/a/b/c", "/x", "/%2e%2e/1.0", "/a b/1"] {
            assert_eq!(package_file(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_package_round_trips_through_the_server() {
        let dir = std::env::temp_dir().join(format!("anode-repo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pkg = anode_modules::builtin::package("null").unwrap();
        let id = format!("{}-{}.amod", pkg.manifest.name, pkg.manifest.version);
        std::fs::write(dir.join(&id), pkg.encode()).unwrap();
        let srv = RepoServer::bind(&dir, "127.0.0.1:0").unwrap();
        let url = format!("http://{}", srv.addr());
        std::thread::spawn(move || srv.run());
        let got = fetch(&url, "null", &pkg.manifest.version.to_string()).unwrap();
        assert_eq!(got, pkg.encode());
        let e = fetch(&url, "null", "9.9.9").unwrap_err();
        assert!(e.contains("404"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
