//! Service modules on a running node: `anode module install|upgrade|list|info|start|stop|
//! remove` over the control socket, and the `[[module]]` startup list of `anode node`.
//!
//! - `install SOURCE [NAME VERSION]`: SOURCE is a package file (`.amod`) or a module
//!   repository URL followed by the module's name and version (fetched here, then sent to
//!   the node). The node verifies the signature against its own trusted keys; this command
//!   only carries bytes. `--config KEY=VALUE` (repeatable; integers or true/false) fills the
//!   module's configuration schema; `--no-start` installs without starting.
//! - `upgrade SOURCE [NAME VERSION]`: replaces the installed version, handing its state over.
//! - `ees`: the node's execution environments as services; `info`, `start`, `stop` take an
//!   EE's name (capsule, plan, deploy) as well as a module's.
//! - `list`, `info NAME`, `start NAME`, `stop NAME`, `remove NAME`, `call NAME OP [ARG]`
//!   (a service operation of an active module), `qdisc NAME --link L --rate-mbps R` (a
//!   queue-discipline module on a link; `--remove` takes it off); `--json` on every one.
//!
//! A node's `[[module]]` startup list is `anode_node::modules`.

use anode_ctl::{ModuleConfig, ModuleConfigValue, ModuleEntry};

use super::client::{Conn, connect_to};

/// The EEs built into the anode binary (upgraded with the binary, `anode upgrade`).
const BUILTIN_EES: [&str; 3] = ["capsule", "plan", "deploy"];

/// Where a package comes from, on the command line.
#[derive(Debug, clap::Args)]
pub struct Source {
    /// A package file (.amod), or a module repository URL (then NAME and VERSION follow).
    pub source: String,
    /// With a repository URL: the module's name.
    pub name: Option<String>,
    /// With a repository URL: the module's version.
    #[arg(value_name = "VERSION")]
    pub ver: Option<String>,
    /// A configuration value KEY=VALUE (an integer, true or false); repeat for more.
    #[arg(long = "config", value_name = "KEY=VALUE")]
    pub config: Vec<String>,
}

/// The running-node subcommands of `anode module`.
#[derive(Debug, clap::Subcommand)]
pub enum NodeModuleCommand {
    /// Install a signed package at a running node (and start it).
    #[command(after_help = "\
Examples:
  anode module install null-1.0.0.amod --node-port 4001
  anode module install http://127.0.0.1:8700 ratelimit 1.0.0 --config limit=100 --socket PATH

The node verifies the package against the publisher keys of its config ([modules]
trusted_keys); an unsigned, tampered or untrusted package is refused.")]
    Install {
        #[command(flatten)]
        src: Source,
        /// Install only; start it later with `anode module start`.
        #[arg(long)]
        no_start: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Replace an installed module by another version, handing its state over. A built-in
    /// EE (capsule, plan, deploy) is native code in the anode binary: `anode module upgrade
    /// capsule [--binary NEW_ANODE]` replaces the node's process by the new binary with its
    /// state handed over (`anode upgrade`), so no accepted capsule is lost.
    #[command(after_help = "\
Examples:
  anode module upgrade counter-1.1.0.amod --node-port 4003
  anode module upgrade capsule --binary /opt/anode-0.2/bin/anode --node-port 4003")]
    Upgrade {
        #[command(flatten)]
        src: Source,
        /// For a built-in EE: the new anode executable (default: the node's own, as it is on
        /// disk now).
        #[arg(long, value_name = "PATH")]
        binary: Option<std::path::PathBuf>,
        #[command(flatten)]
        conn: Conn,
    },
    /// List the modules installed at a running node.
    List(Conn),
    /// The node's execution environments as services (capsule, plan, deploy, and EE modules
    /// from signed packages): kind ee, state, packets handed to each. `anode module
    /// stop|start|info NAME` act on one.
    #[command(after_help = "\
Examples:
  anode module ees --node-port 4001
  anode module stop capsule --node-port 4001    # capsules are dropped (ee_stopped) until
  anode module start capsule --node-port 4001   # it is started again; its code cache stays")]
    Ees(Conn),
    /// The service interfaces a running node's modules provide, by interface (highest
    /// version first) with their providers' categories and users; with --interface, the
    /// provider a module of --category would be given (the service hierarchy's lookup).
    #[command(after_help = "Examples:
  anode module services --node-port 4001
  anode module services --interface flow-counter --range ^1.0 --category user --node-port 4001")]
    Services {
        /// The interface to look up.
        #[arg(long, value_name = "NAME")]
        interface: Option<String>,
        /// The version range wanted (semver, e.g. ^1.2); default any.
        #[arg(long, value_name = "RANGE", requires = "interface")]
        range: Option<String>,
        /// The category of the module that would use it (system, standard, function, user).
        #[arg(
            long,
            value_name = "CATEGORY",
            requires = "interface",
            default_value = "user"
        )]
        category: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show one installed module.
    Info {
        /// The module's name.
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Start an installed module.
    Start {
        /// The module's name.
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Stop an active module.
    Stop {
        /// The module's name.
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Call operation OP of an active module's service with ARG (prints what it returns).
    #[command(
        after_help = "Example: anode module call flowcount 1 9 --node-port 4001   # flow 9's count"
    )]
    Call {
        /// The module's name.
        name: String,
        /// The operation.
        op: i32,
        /// Its argument.
        #[arg(default_value_t = 0, allow_negative_numbers = true)]
        arg: i64,
        #[command(flatten)]
        conn: Conn,
    },
    /// Put a queue-discipline module on a link (PLANet's run-time queue swap), or remove it.
    #[command(after_help = "\
Examples:
  anode module qdisc rr --link to-r2 --rate-mbps 40 --node-port 4001   # packets waiting move over
  anode module qdisc --remove --link to-r2 --node-port 4001")]
    Qdisc {
        /// The qdisc module (installed at the node).
        #[arg(required_unless_present = "remove")]
        name: Option<String>,
        /// The link's name or index.
        #[arg(long)]
        link: String,
        /// The link's transmit rate in Mbit/s.
        #[arg(long, required_unless_present = "remove")]
        rate_mbps: Option<f64>,
        /// Remove the link's queue discipline instead.
        #[arg(long, conflicts_with_all = ["name", "rate_mbps"])]
        remove: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Remove a module.
    Remove {
        /// The module's name.
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Deploy a signed package on every node along the path to --to (soft state: it goes
    /// after --ttl unless deployed again).
    Deploy(super::module_deploy::DeployArgs),
    /// Remove a deployed module from every node along the path to --to.
    Undeploy(super::module_deploy::UndeployArgs),
    /// The modules deployed at a running node along a path, and the deployment counters.
    Deployments(Conn),
}

/// Parses `KEY=VALUE` configuration arguments.
fn parse_config(args: &[String]) -> Result<ModuleConfig, String> {
    let mut c = ModuleConfig::new();
    for a in args {
        let (k, v) = a
            .split_once('=')
            .ok_or_else(|| format!("--config {a}: write KEY=VALUE, e.g. --config limit=100"))?;
        let v = match v.trim() {
            "true" => ModuleConfigValue::Bool(true),
            "false" => ModuleConfigValue::Bool(false),
            n => ModuleConfigValue::Int(n.parse().map_err(|_| {
                format!("--config {a}: the value must be an integer, true or false")
            })?),
        };
        c.insert(k.trim().to_string(), v);
    }
    Ok(c)
}

/// The package bytes a [`Source`] names.
fn package_bytes(s: &Source) -> Result<Vec<u8>, String> {
    anode_node::repo::package_bytes(&s.source, s.name.as_deref(), s.ver.as_deref())
}

/// `module list`: one row per module under a header, then what any of them misses.
fn list_table(l: &[ModuleEntry]) -> String {
    let mut t = super::client::table::Table::new(&[
        "NAME", "VERSION", "KIND", "CATEGORY", "STATE", "ORIGIN", "HOOK", "PACKETS", "SUMMARY",
    ]);
    let mut notes = String::new();
    for m in l {
        t.row(vec![
            m.name.clone(),
            m.version.clone(),
            m.kind.clone(),
            m.category.clone(),
            m.state.clone(),
            m.origin.clone().unwrap_or_else(|| "-".into()),
            m.hook.clone().unwrap_or_else(|| "-".into()),
            m.packets.to_string(),
            m.summary.clone(),
        ]);
        for what in &m.missing {
            notes.push_str(&format!("{}: missing {what}\n", m.name));
        }
        if let Some(e) = &m.last_error {
            notes.push_str(&format!("{}: last error: {e}\n", m.name));
        }
    }
    t.render() + &notes
}

/// `module services`: one row per interface and provider.
fn services_table(l: &[anode_ctl::ServiceEntry]) -> String {
    let mut t = super::client::table::Table::new(&[
        "INTERFACE",
        "VERSION",
        "PROVIDER",
        "CATEGORY",
        "STATE",
        "USERS",
    ]);
    for s in l {
        t.row(vec![
            s.interface.clone(),
            s.version.clone(),
            s.provider.clone(),
            s.category.clone(),
            s.state.clone(),
            if s.users.is_empty() {
                "-".into()
            } else {
                s.users.join(", ")
            },
        ]);
    }
    t.render()
}

fn line(m: &ModuleEntry) -> String {
    let mut s = format!(
        "{:<12} {:<8} {:<9} {:<10} {:<8} {:<13} {:>10} pkts  {}",
        m.name,
        m.version,
        m.kind,
        m.state,
        m.origin.as_deref().unwrap_or("-"),
        m.hook.as_deref().unwrap_or("-"),
        m.packets,
        m.summary
    );
    for what in &m.missing {
        s.push_str(&format!("\n    missing {what}"));
    }
    if let Some(e) = &m.last_error {
        s.push_str(&format!("\n    last error: {e}"));
    }
    s.push('\n');
    s
}

fn details(m: &ModuleEntry) -> String {
    let mut s = line(m);
    s.push_str(&format!("    code sha256 {}\n", m.code_sha256));
    s.push_str(&format!(
        "    publisher   {}\n",
        m.publisher.as_deref().unwrap_or("-")
    ));
    s.push_str(&format!("    category    {}\n", m.category));
    s.push_str(&format!("    load order  {}\n", m.load_order));
    if !m.provides.is_empty() {
        s.push_str(&format!("    provides    {}\n", m.provides.join(", ")));
    }
    if !m.requires.is_empty() {
        s.push_str(&format!("    requires    {}\n", m.requires.join(", ")));
    }
    if let Some((bytes, count)) = m.file_quota {
        s.push_str(&format!(
            "    files       {} of {count}, {} of {bytes} bytes\n",
            m.files.0, m.files.1
        ));
    }
    s
}

fn out(json: bool, v: &impl serde::Serialize, text: String) -> super::CmdResult {
    if json {
        let s = serde_json::to_string(v).map_err(|e| format!("cannot encode JSON: {e}"))?;
        println!("{s}");
    } else {
        print!("{text}");
    }
    Ok(())
}

/// Runs a running-node module command.
pub fn run(c: NodeModuleCommand) -> super::CmdResult {
    let e = |e: anode_ctl::ClientError| e.to_string();
    match c {
        NodeModuleCommand::Deploy(a) => super::module_deploy::deploy(a),
        NodeModuleCommand::Undeploy(a) => super::module_deploy::undeploy(a),
        NodeModuleCommand::Deployments(conn) => super::module_deploy::deployments(&conn),
        NodeModuleCommand::Install {
            src,
            no_start,
            conn,
        } => {
            let cfg = parse_config(&src.config)?;
            let bytes = package_bytes(&src)?;
            let m = connect_to(&conn)?
                .module_install(bytes, cfg, !no_start)
                .map_err(e)?;
            let text = format!("installed {}", line(&m));
            out(conn.json(), &m, text)
        }
        NodeModuleCommand::Upgrade { src, binary, conn } => {
            let builtin = BUILTIN_EES.contains(&src.source.as_str())
                && !std::path::Path::new(&src.source).exists();
            if builtin {
                return super::client::upgrade_node(binary, 30, &conn).map_err(|e| e.to_string());
            }
            if binary.is_some() {
                return Err(format!(
                    "--binary upgrades a built-in EE ({}); {} is a package",
                    BUILTIN_EES.join(", "),
                    src.source
                ));
            }
            let cfg = parse_config(&src.config)?;
            let bytes = package_bytes(&src)?;
            let m = connect_to(&conn)?.module_upgrade(bytes, cfg).map_err(e)?;
            let text = format!("upgraded {}", line(&m));
            out(conn.json(), &m, text)
        }
        NodeModuleCommand::Ees(conn) => {
            let l = connect_to(&conn)?.module_ees().map_err(e)?;
            out(conn.json(), &l, list_table(&l))
        }
        NodeModuleCommand::List(conn) => {
            let l = connect_to(&conn)?.module_list().map_err(e)?;
            let text = if l.is_empty() {
                "no modules installed\n".to_string()
            } else {
                list_table(&l)
            };
            out(conn.json(), &l, text)
        }
        NodeModuleCommand::Services {
            interface,
            range,
            category,
            conn,
        } => {
            let looked = interface.clone();
            let l = connect_to(&conn)?
                .module_services(interface, range, Some(category))
                .map_err(e)?;
            let text = match (&looked, l.is_empty()) {
                (Some(i), true) => format!("no usable provider of {i}\n"),
                (None, true) => "no services provided\n".to_string(),
                _ => services_table(&l),
            };
            out(conn.json(), &l, text)
        }
        NodeModuleCommand::Info { name, conn } => {
            let m = connect_to(&conn)?.module_info(&name).map_err(e)?;
            let text = details(&m);
            out(conn.json(), &m, text)
        }
        NodeModuleCommand::Start { name, conn } => {
            let m = connect_to(&conn)?.module_start(&name).map_err(e)?;
            let text = format!("started {}", line(&m));
            out(conn.json(), &m, text)
        }
        NodeModuleCommand::Stop { name, conn } => {
            let m = connect_to(&conn)?.module_stop(&name).map_err(e)?;
            let text = format!("stopped {}", line(&m));
            out(conn.json(), &m, text)
        }
        NodeModuleCommand::Call {
            name,
            op,
            arg,
            conn,
        } => {
            let r = connect_to(&conn)?.module_call(&name, op, arg).map_err(e)?;
            let v = serde_json::json!({"name": name, "op": op, "arg": arg, "result": r});
            out(conn.json(), &v, format!("{r}\n"))
        }
        NodeModuleCommand::Qdisc {
            name,
            link,
            rate_mbps,
            remove: _,
            conn,
        } => {
            let mbps = rate_mbps.unwrap_or(0.0);
            if name.is_some() && !(mbps > 0.0 && mbps <= 1e6) {
                return Err(format!(
                    "--rate-mbps {mbps}: give the link's rate in Mbit/s, above 0 and at most 1000000"
                ));
            }
            let bps = (mbps * 1e6) as u64;
            let replaced = connect_to(&conn)?
                .module_qdisc(name.as_deref(), &link, bps)
                .map_err(e)?;
            let v = serde_json::json!({"link": link, "qdisc": name, "rate_bps": bps, "replaced": replaced});
            let text = format!(
                "link {link}: {} (replaced {})\n",
                name.as_deref()
                    .map_or("no queue discipline".to_string(), |q| format!(
                        "{q} at {mbps} Mbit/s"
                    )),
                replaced.as_deref().unwrap_or("none")
            );
            out(conn.json(), &v, text)
        }
        NodeModuleCommand::Remove { name, conn } => {
            let m = connect_to(&conn)?.module_remove(&name).map_err(e)?;
            let text = format!("removed {}@{}\n", m.name, m.version);
            out(conn.json(), &m, text)
        }
    }
}
