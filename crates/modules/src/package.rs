//! Module packages, publisher keys and trust.
//!
//! A package (`NAME-VERSION.amod`) holds the manifest text, the WebAssembly code and, once
//! signed, the publisher's ed25519 public key and a signature over
//! `"anode-module-v1" || SHA-256(manifest) || SHA-256(code)`:
//!
//! ```text
//! "ANODEMOD1\n" | u32 manifest_len | manifest | u32 code_len | code | u32 sig_len | sig
//! ```
//! (lengths big-endian; `sig` is empty, or 32 bytes of public key then 64 of signature).
//!
//! A node trusts the publisher keys in its configuration. [`Trust::verify`] refuses an
//! unsigned package ([`ModuleError::Unsigned`]), one whose signature does not verify under the
//! key it names ([`ModuleError::Tampered`]: a byte of manifest or code changed), and one signed
//! by a key not trusted here ([`ModuleError::Untrusted`]), in that order of checks.
//!
//! Contract: [`Package::decode`] never panics and bounds every length.

use std::path::Path;

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use sha2::{Digest, Sha256};

use crate::{Manifest, ModuleError};

const MAGIC: &[u8] = b"ANODEMOD1\n";
const DOMAIN: &[u8] = b"anode-module-v1";
/// Largest manifest.
pub const MAX_MANIFEST: usize = 64 << 10;
/// Largest code.
pub const MAX_CODE: usize = 8 << 20;

/// A module package.
#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    /// The manifest text (signed as is).
    pub manifest_text: String,
    /// The parsed manifest.
    pub manifest: Manifest,
    /// The WebAssembly code.
    pub code: Vec<u8>,
    /// Publisher key and signature, if signed.
    pub signature: Option<([u8; 32], [u8; 64])>,
}

/// Where the code of the module in `dir` is: `module.wasm`, or a module crate's release
/// build (searched in `dir/target` and the `target` of up to three directories above, where a
/// workspace builds its members).
pub fn module_code_path(dir: &Path) -> Result<std::path::PathBuf, ModuleError> {
    let plain = dir.join("module.wasm");
    let cargo = dir.join("Cargo.toml");
    if plain.exists() || !cargo.exists() {
        return Ok(plain);
    }
    let text = std::fs::read_to_string(&cargo)
        .map_err(|e| ModuleError::Io(format!("{}: {e}", cargo.display())))?;
    let name = toml::from_str::<toml::Table>(&text)
        .ok()
        .and_then(|t| {
            t.get("package")?
                .get("name")?
                .as_str()
                .map(|n| n.replace('-', "_"))
        })
        .ok_or_else(|| ModuleError::Package(format!("{}: no [package] name", cargo.display())))?;
    let rel = format!("target/wasm32-unknown-unknown/release/{name}.wasm");
    let found = dir
        .ancestors()
        .take(4)
        .map(|d| d.join(&rel))
        .find(|p| p.exists());
    found.ok_or_else(|| {
        ModuleError::Io(format!(
            "{}: a module crate that is not built yet (no module.wasm, no {rel}): run \
             `cargo build --release` in it (its .cargo/config.toml targets \
             wasm32-unknown-unknown; otherwise add --target wasm32-unknown-unknown), \
             or pack a built-in module with `anode module pack --builtin NAME`",
            dir.display()
        ))
    })
}

impl Package {
    /// A package from a manifest and code (unsigned).
    pub fn new(manifest_text: String, code: Vec<u8>) -> Result<Package, ModuleError> {
        if manifest_text.len() > MAX_MANIFEST || code.len() > MAX_CODE {
            return Err(ModuleError::Package(format!(
                "manifest ({} bytes) or code ({} bytes) too large (limits {MAX_MANIFEST}, {MAX_CODE})",
                manifest_text.len(),
                code.len()
            )));
        }
        let manifest = Manifest::parse(&manifest_text)?;
        Ok(Package {
            manifest_text,
            manifest,
            code,
            signature: None,
        })
    }

    /// Reads `DIR/manifest.toml` and the module's code (`anode module pack DIR`): `DIR/module.wasm`
    /// if there is one, else, for a module crate (`DIR/Cargo.toml`, as `anode new module`
    /// makes), the crate's release build `target/wasm32-unknown-unknown/release/CRATE.wasm` in
    /// DIR or the workspace above it.
    pub fn from_dir(dir: &Path) -> Result<Package, ModuleError> {
        let m = dir.join("manifest.toml");
        let text = std::fs::read_to_string(&m)
            .map_err(|e| ModuleError::Io(format!("{}: {e}", m.display())))?;
        let c = module_code_path(dir)?;
        let code =
            std::fs::read(&c).map_err(|e| ModuleError::Io(format!("{}: {e}", c.display())))?;
        if !code.starts_with(b"\0asm") {
            return Err(ModuleError::Package(format!(
                "{} is not a WebAssembly module",
                c.display()
            )));
        }
        Package::new(text, code)
    }

    /// `name@version`.
    pub fn id(&self) -> String {
        format!("{}@{}", self.manifest.name, self.manifest.version)
    }

    /// The file name it is stored under: `NAME-VERSION.amod`.
    pub fn file_name(&self) -> String {
        format!("{}-{}.amod", self.manifest.name, self.manifest.version)
    }

    /// What the signature covers.
    pub fn signed_message(&self) -> Vec<u8> {
        let mut m = DOMAIN.to_vec();
        m.extend_from_slice(&Sha256::digest(self.manifest_text.as_bytes()));
        m.extend_from_slice(&Sha256::digest(&self.code));
        m
    }

    /// SHA-256 of the code, hex.
    pub fn code_hash(&self) -> String {
        hex::encode(Sha256::digest(&self.code))
    }

    /// Signs with a publisher key (replacing any signature).
    pub fn sign(&mut self, key: &SigningKey) {
        let sig = key.sign(&self.signed_message());
        self.signature = Some((key.verifying_key().to_bytes(), sig.to_bytes()));
    }

    /// The package file bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        for part in [self.manifest_text.as_bytes(), &self.code[..]] {
            b.extend_from_slice(&(part.len() as u32).to_be_bytes());
            b.extend_from_slice(part);
        }
        match &self.signature {
            Some((k, s)) => {
                b.extend_from_slice(&96u32.to_be_bytes());
                b.extend_from_slice(k);
                b.extend_from_slice(s);
            }
            None => b.extend_from_slice(&0u32.to_be_bytes()),
        }
        b
    }

    /// Parses package file bytes (the signature is not checked here: see [`Trust::verify`]).
    pub fn decode(bytes: &[u8]) -> Result<Package, ModuleError> {
        let bad = |s: &str| ModuleError::Package(s.to_string());
        let rest = bytes
            .strip_prefix(MAGIC)
            .ok_or_else(|| bad("not an anode module package (bad magic)"))?;
        let (manifest, rest) = take(rest, MAX_MANIFEST).ok_or_else(|| bad("truncated manifest"))?;
        let (code, rest) = take(rest, MAX_CODE).ok_or_else(|| bad("truncated code"))?;
        let (sig, rest) = take(rest, 96).ok_or_else(|| bad("truncated signature"))?;
        if !rest.is_empty() {
            return Err(bad("trailing bytes after the signature"));
        }
        let text = std::str::from_utf8(manifest)
            .map_err(|_| bad("manifest is not UTF-8"))?
            .to_string();
        let mut p = Package::new(text, code.to_vec())?;
        p.signature = match sig.len() {
            0 => None,
            96 => {
                let (k, s) = sig.split_at(32);
                let k: [u8; 32] = k.try_into().map_err(|_| bad("signature key"))?;
                let s: [u8; 64] = s.try_into().map_err(|_| bad("signature"))?;
                Some((k, s))
            }
            _ => return Err(bad("signature block must be 0 or 96 bytes")),
        };
        Ok(p)
    }

    /// Reads a package file.
    pub fn read(path: &Path) -> Result<Package, ModuleError> {
        let b =
            std::fs::read(path).map_err(|e| ModuleError::Io(format!("{}: {e}", path.display())))?;
        Package::decode(&b)
    }

    /// Writes the package file.
    pub fn write(&self, path: &Path) -> Result<(), ModuleError> {
        std::fs::write(path, self.encode())
            .map_err(|e| ModuleError::Io(format!("{}: {e}", path.display())))
    }
}

fn take(b: &[u8], max: usize) -> Option<(&[u8], &[u8])> {
    let (l, rest) = b.split_first_chunk::<4>()?;
    let n = u32::from_be_bytes(*l) as usize;
    if n > max {
        return None;
    }
    if rest.len() < n {
        return None;
    }
    Some(rest.split_at(n))
}

/// A new publisher key from the OS random source.
pub fn generate_key() -> SigningKey {
    SigningKey::generate(&mut rand::rngs::OsRng)
}

/// Writes `BASE.key` (secret, hex, mode 0600) and `BASE.pub` (public, hex).
pub fn write_key(key: &SigningKey, base: &Path) -> Result<(String, String), ModuleError> {
    use std::io::Write;
    let secret = base.with_extension("key");
    let public = base.with_extension("pub");
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    let mut f = o
        .open(&secret)
        .map_err(|e| ModuleError::Io(format!("{}: {e}", secret.display())))?;
    writeln!(f, "{}", hex::encode(key.to_bytes()))
        .map_err(|e| ModuleError::Io(format!("{}: {e}", secret.display())))?;
    let pubhex = hex::encode(key.verifying_key().to_bytes());
    std::fs::write(&public, format!("{pubhex}\n"))
        .map_err(|e| ModuleError::Io(format!("{}: {e}", public.display())))?;
    Ok((secret.display().to_string(), pubhex))
}

/// Reads a secret key file written by [`write_key`].
pub fn read_key(path: &Path) -> Result<SigningKey, ModuleError> {
    let s = std::fs::read_to_string(path)
        .map_err(|e| ModuleError::Key(format!("{}: {e}", path.display())))?;
    let mut b = [0u8; 32];
    hex::decode_to_slice(s.trim(), &mut b).map_err(|e| {
        ModuleError::Key(format!(
            "{}: not a hex ed25519 secret key: {e}",
            path.display()
        ))
    })?;
    Ok(SigningKey::from_bytes(&b))
}

/// Parses a public key in hex.
pub fn parse_public(hexkey: &str) -> Result<VerifyingKey, ModuleError> {
    let mut b = [0u8; 32];
    hex::decode_to_slice(hexkey.trim(), &mut b)
        .map_err(|e| ModuleError::Key(format!("'{hexkey}': not a hex ed25519 public key: {e}")))?;
    VerifyingKey::from_bytes(&b).map_err(|e| ModuleError::Key(format!("'{hexkey}': {e}")))
}

/// The publisher keys a node trusts.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    keys: Vec<VerifyingKey>,
}

impl Trust {
    /// Trusts these keys.
    pub fn new(keys: Vec<VerifyingKey>) -> Self {
        Trust { keys }
    }

    /// Trusts the keys given in hex.
    pub fn from_hex<S: AsRef<str>>(keys: &[S]) -> Result<Self, ModuleError> {
        Ok(Trust {
            keys: keys
                .iter()
                .map(|k| parse_public(k.as_ref()))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Checks a package: signed, intact, by a trusted publisher.
    pub fn verify(&self, p: &Package) -> Result<(), ModuleError> {
        let id = p.id();
        let Some((k, s)) = &p.signature else {
            return Err(ModuleError::Unsigned(id));
        };
        let key = VerifyingKey::from_bytes(k).map_err(|_| ModuleError::Tampered(id.clone()))?;
        let sig = Signature::from_bytes(s);
        key.verify(&p.signed_message(), &sig)
            .map_err(|_| ModuleError::Tampered(id.clone()))?;
        if !self.keys.contains(&key) {
            return Err(ModuleError::Untrusted {
                name: id,
                key: hex::encode(k),
            });
        }
        Ok(())
    }
}
