//! `[deploy]`: which keys may deploy modules here along a path (`anode module deploy`), and
//! the limits of the deployment service. A node hosts the service when it hosts modules
//! (`[modules] trusted_keys`); with no `[[deploy.key]]` every request is refused as
//! `disabled` (and still passed on toward its target).
//!
//! ```toml
//! [deploy]
//! # max_ttl_s = 3600           # longest lifetime a deployment may ask for (1 to 86400)
//! # max_package_bytes = 4194304  # largest package fetched and installed
//! # max_modules = 32           # modules deployed here at once
//!
//! [[deploy.key]]               # one per requester allowed to deploy
//! key = "3b6a27bc..."          # ed25519 public key (BASE.pub of `anode keygen --out BASE`)
//! name = "ops"                 # in results and `anode module deployments`
//! categories = ["function", "user"]   # what it may deploy (also "standard"; never
//!                              # "system": those the operator installs)
//! ```
//!
//! The package itself must still be signed by a publisher in `[modules] trusted_keys`.

use anode_ctl::remote::short_key;
use anode_modules::Category;
use anode_modules::deploy::{DEFAULT_CATEGORIES, DeployKey, DeployPolicy};
use serde::Deserialize;
use toml::Spanned;

use super::check::{Problem, at, public_key};

/// `[deploy]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDeploy {
    pub max_ttl_s: Option<Spanned<u32>>,
    pub max_package_bytes: Option<Spanned<u32>>,
    pub max_modules: Option<Spanned<usize>>,
    #[serde(default)]
    pub key: Vec<RawDeployKey>,
}

/// `[[deploy.key]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDeployKey {
    pub key: Spanned<String>,
    pub name: Option<String>,
    pub categories: Option<Spanned<Vec<String>>>,
}

fn range<T: Copy + PartialOrd + std::fmt::Display>(
    text: &str,
    v: &Option<Spanned<T>>,
    (lo, hi, default): (T, T, T),
    what: &str,
) -> Result<T, Problem> {
    match v {
        None => Ok(default),
        Some(s) if *s.get_ref() >= lo && *s.get_ref() <= hi => Ok(*s.get_ref()),
        Some(s) => Err(at(
            text,
            s,
            format!("[deploy] {what} = {} is out of range", s.get_ref()),
            &format!("give {lo} to {hi}"),
        )),
    }
}

/// Checks `[deploy]` (parsed from `text`).
pub(super) fn check(text: &str, raw: &RawDeploy) -> Result<DeployPolicy, Problem> {
    let d = DeployPolicy::default();
    let mut policy = DeployPolicy {
        keys: Vec::new(),
        max_ttl_s: range(text, &raw.max_ttl_s, (1, 86_400, d.max_ttl_s), "max_ttl_s")?,
        max_package_bytes: range(
            text,
            &raw.max_package_bytes,
            (1024, 64 << 20, d.max_package_bytes),
            "max_package_bytes",
        )?,
        max_modules: range(
            text,
            &raw.max_modules,
            (1, 1024, d.max_modules),
            "max_modules",
        )?,
        cache_bytes: d.cache_bytes,
    };
    policy.cache_bytes = policy
        .cache_bytes
        .max(2 * policy.max_package_bytes as usize);
    for k in &raw.key {
        let key = public_key(
            text,
            &k.key,
            "[[deploy.key]]",
            "give the 64 hex digits of the BASE.pub file `anode keygen --out BASE` writes",
        )?;
        if policy.keys.iter().any(|o| o.key == key.to_bytes()) {
            return Err(at(
                text,
                &k.key,
                format!("key {} is listed twice in [[deploy.key]]", short_key(&key)),
                "give each key once, with every category it may deploy",
            ));
        }
        let categories = match &k.categories {
            None => DEFAULT_CATEGORIES.to_vec(),
            Some(c) => categories(text, c)?,
        };
        policy.keys.push(DeployKey {
            key: key.to_bytes(),
            name: k.name.clone().unwrap_or_else(|| short_key(&key)),
            categories,
        });
    }
    Ok(policy)
}

fn categories(text: &str, c: &Spanned<Vec<String>>) -> Result<Vec<Category>, Problem> {
    let mut out = Vec::new();
    for name in c.get_ref() {
        match Category::ALL.into_iter().find(|k| k.name() == name) {
            Some(Category::System) => {
                return Err(at(
                    text,
                    c,
                    "[[deploy.key]] categories has \"system\": system modules are not deployed"
                        .into(),
                    "install system modules with the node's config or `anode module install`; deploy standard, function or user modules",
                ));
            }
            Some(k) if !out.contains(&k) => out.push(k),
            Some(_) => {}
            None => {
                return Err(at(
                    text,
                    c,
                    format!("[[deploy.key]] categories has '{name}', which is not a category"),
                    "use \"standard\", \"function\" and \"user\"",
                ));
            }
        }
    }
    if out.is_empty() {
        return Err(at(
            text,
            c,
            "[[deploy.key]] categories is empty: the key could deploy nothing".into(),
            "give at least categories = [\"user\"], or remove the key",
        ));
    }
    Ok(out)
}
