//! `anode keygen`, `anode module pack|sign|verify|show`, `anode repo serve`: making, signing
//! and publishing service modules (see docs/modules.md). The commands against a running node
//! (`install`, `upgrade`, `list`, ...) are in `module_ops.rs`.
//!
//! - `anode keygen --out BASE` writes a publisher key: `BASE.key` (secret, 0600) and
//!   `BASE.pub` (the hex public key a node lists in its trusted keys).
//! - `anode module pack DIR` reads `DIR/manifest.toml` and `DIR/module.wasm`, checks the
//!   manifest, and writes the unsigned package `NAME-VERSION.amod`.
//! - `anode module sign FILE --key BASE.key` signs a package in place.
//! - `anode module verify FILE --trust HEX` says whether a node trusting HEX would accept it
//!   (and if not: unsigned, tampered or untrusted).
//! - `anode module show FILE` prints the manifest, code hash and signer.
//! - `anode repo serve DIR --listen ADDR` serves the packages in DIR over HTTP at
//!   `/NAME/VERSION` (and `/NAME-VERSION.amod`); `anode module fetch URL NAME VERSION --trust
//!   HEX` fetches one and verifies it before writing it.

use std::path::PathBuf;

use anode_modules::{Package, Trust};

/// Arguments of `anode keygen`.
#[derive(Debug, clap::Args)]
pub struct KeygenArgs {
    /// Where to write the key: BASE.key (secret) and BASE.pub (public).
    #[arg(long, default_value = "publisher")]
    pub out: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `anode module ...`.
#[derive(Debug, clap::Subcommand)]
pub enum ModuleCommand {
    /// Modules on a running node (install, upgrade, list, info, start, stop, remove).
    #[command(flatten)]
    Node(super::module_ops::NodeModuleCommand),
    /// Pack DIR/manifest.toml and DIR/module.wasm (or a built-in module) into an unsigned
    /// NAME-VERSION.amod.
    Pack {
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        /// The module directory.
        #[arg(required_unless_present = "builtin")]
        dir: Option<PathBuf>,
        /// Pack the built-in module NAME (one of guest/modules/, compiled into this binary)
        /// instead of a directory.
        #[arg(long, value_name = "NAME", conflicts_with = "dir")]
        builtin: Option<String>,
        /// Output file (default: NAME-VERSION.amod in the current directory).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Sign a package with a publisher key (in place).
    Sign {
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        /// The package.
        file: PathBuf,
        /// The secret key file from `anode keygen`.
        #[arg(long)]
        key: PathBuf,
    },
    /// Check a package as a node trusting the given keys would.
    Verify {
        /// The package.
        file: PathBuf,
        /// A trusted publisher key (hex); repeat for more.
        #[arg(long = "trust", required = true)]
        trust: Vec<String>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a package's manifest, code hash and signer.
    Show {
        /// The package.
        file: PathBuf,
        /// Print it as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Fetch NAME VERSION from a module repository and verify it before saving it.
    Fetch {
        /// The repository, e.g. http://127.0.0.1:8700
        url: String,
        /// Module name.
        name: String,
        /// Module version.
        #[arg(value_name = "VERSION")]
        ver: String,
        /// A trusted publisher key (hex); repeat for more.
        #[arg(long = "trust", required = true)]
        trust: Vec<String>,
        /// Where to save it (default NAME-VERSION.amod).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// `anode repo ...`.
#[derive(Debug, clap::Subcommand)]
pub enum RepoCommand {
    /// Serve the packages in DIR over HTTP (GET /NAME/VERSION).
    Serve {
        /// The directory of .amod files.
        dir: PathBuf,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8700")]
        listen: String,
    },
}

/// Runs `anode keygen`.
pub fn keygen(a: KeygenArgs) -> super::CmdResult {
    let key = anode_modules::generate_key();
    let (secret, public) = anode_modules::write_key(&key, &a.out).map_err(|e| e.to_string())?;
    if a.json {
        let v = serde_json::json!({"secret_key_file": secret, "public_key": public});
        println!("{v}");
        return Ok(());
    }
    println!("secret key: {secret} (keep it private)");
    println!("public key: {public}");
    println!("give the public key to the nodes that should trust the modules you sign");
    Ok(())
}

/// Runs `anode module ...`.
pub fn run(c: ModuleCommand) -> super::CmdResult {
    match c {
        ModuleCommand::Node(c) => super::module_ops::run(c),
        ModuleCommand::Pack {
            dir,
            builtin,
            out,
            json,
        } => {
            let p = anode_node::repo::pack_source(dir.as_deref(), builtin.as_deref())?;
            let out = out.unwrap_or_else(|| PathBuf::from(p.file_name()));
            p.write(&out).map_err(|e| e.to_string())?;
            if json {
                let v = serde_json::json!({
                    "module": p.id(), "file": out.display().to_string(),
                    "code_bytes": p.code.len(), "signed": false,
                });
                println!("{v}");
                return Ok(());
            }
            println!(
                "packed {} ({} bytes of code) into {} (unsigned: sign it with `anode module sign`)",
                p.id(),
                p.code.len(),
                out.display()
            );
            Ok(())
        }
        ModuleCommand::Sign { file, key, json } => {
            let mut p = Package::read(&file).map_err(|e| e.to_string())?;
            let k = anode_modules::read_key(&key).map_err(|e| e.to_string())?;
            p.sign(&k);
            p.write(&file).map_err(|e| e.to_string())?;
            if json {
                let v = serde_json::json!({
                    "module": p.id(), "file": file.display().to_string(),
                    "signed_by": hex::encode(k.verifying_key().to_bytes()),
                });
                println!("{v}");
                return Ok(());
            }
            println!(
                "signed {} with {}",
                p.id(),
                hex::encode(k.verifying_key().to_bytes())
            );
            Ok(())
        }
        ModuleCommand::Verify { file, trust, json } => {
            let p = Package::read(&file).map_err(|e| e.to_string())?;
            let t = Trust::from_hex(&trust).map_err(|e| e.to_string())?;
            t.verify(&p).map_err(|e| e.to_string())?;
            if json {
                let signer = p.signature.as_ref().map(|(k, _)| hex::encode(k));
                let v = serde_json::json!({"module": p.id(), "ok": true, "signed_by": signer});
                println!("{v}");
            } else {
                println!("{}: signed, intact, trusted", p.id());
            }
            Ok(())
        }
        ModuleCommand::Show { file, json } => {
            let p = Package::read(&file).map_err(|e| e.to_string())?;
            if json {
                let v = serde_json::json!({
                    "module": p.id(),
                    "manifest": p.manifest_text,
                    "code_bytes": p.code.len(),
                    "code_sha256": p.code_hash().to_string(),
                    "signed_by": p.signature.as_ref().map(|(k, _)| hex::encode(k)),
                });
                println!("{v}");
                return Ok(());
            }
            println!("{}", p.manifest_text.trim_end());
            println!("# code: {} bytes, sha256 {}", p.code.len(), p.code_hash());
            match &p.signature {
                Some((k, _)) => println!("# signed by {}", hex::encode(k)),
                None => println!("# unsigned"),
            }
            Ok(())
        }
        ModuleCommand::Fetch {
            url,
            name,
            ver: version,
            trust,
            out,
        } => {
            let t = Trust::from_hex(&trust).map_err(|e| e.to_string())?;
            let body = anode_node::repo::http_get(&url, &format!("/{name}/{version}"))?;
            let p = Package::decode(&body).map_err(|e| e.to_string())?;
            if p.manifest.name != name || p.manifest.version.to_string() != version {
                return Err(format!(
                    "the repository answered with {} for {name}@{version}: refused",
                    p.id()
                ));
            }
            t.verify(&p).map_err(|e| e.to_string())?;
            let out = out.unwrap_or_else(|| PathBuf::from(p.file_name()));
            p.write(&out).map_err(|e| e.to_string())?;
            println!("fetched and verified {} into {}", p.id(), out.display());
            Ok(())
        }
    }
}

/// Runs `anode repo ...`.
pub fn repo(c: RepoCommand) -> super::CmdResult {
    let RepoCommand::Serve { dir, listen } = c;
    let srv = anode_node::repo::RepoServer::bind(&dir, &listen)?;
    println!(
        "serving modules from {} on http://{}/NAME/VERSION",
        dir.display(),
        srv.addr()
    );
    srv.run();
    Ok(())
}
