//! The module manifest: a TOML document naming the module, its version, a one-line summary
//! (Click style: "Counts packets and forwards them unchanged."), its kind, the services it
//! provides and requires (with semver version ranges), the resources it asks for, its
//! configuration schema and, for packet processors, its hook point and demux filters.
//!
//! ```toml
//! name = "counter"
//! version = "1.0.0"
//! summary = "Counts the packets it sees and passes them on."
//! kind = "processor"          # processor | qdisc | service | routing-function | plan-service | control-service | ee
//! category = "user"           # system | standard | function | user (ORE's service hierarchy;
//!                             # default by kind: see `Category::default_for`)
//! hook = "pre-routing"        # processors: ingress | pre-routing | post-routing | local-delivery
//!                             # EEs instead: type_id = 0x0A10 (the ANEP Type ID they own)
//! provides = [{ name = "flow-counter", version = "1.2.0" }]
//! requires = [{ name = "flow-counter", version = "^1.0" }]
//! [resources]
//! memory_bytes = 1048576
//! fuel_per_call = 100000
//! file_bytes = 65536         # files it may keep (`file_*` imports): bytes, and
//! file_count = 16            # how many (default 0: no files)
//! [[filter]]                  # processors see only packets matching every key of one filter
//! keys = [{ offset = 16, value = "0000000000000005", mask = "00000000000000ff" }]
//! [config.limit]              # typed configuration schema
//! type = "int"
//! default = 100
//! min = 1
//! max = 100000
//! ```
//!
//! Contract: [`Manifest::parse`] never panics on any input and rejects what it does not
//! understand (`deny_unknown_fields`), naming the field and the fix.

use std::collections::BTreeMap;

use anode_core::{DemuxKey, HookPoint};
use serde::{Deserialize, Serialize};

use crate::ModuleError;

/// Where a module sits in Openet/ORE's service hierarchy, lowest first. The order is the
/// hierarchy's: a module may require services only of its own category or a lower one, the
/// startup list starts lower categories first, and remote management needs more than
/// `manage` for the two lowest (`docs/modules.md`, "The service hierarchy").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// Changes how the node forwards every packet (ORE's JFWD): queue disciplines, routing
    /// functions.
    System,
    /// The node's own standard features that other services build on.
    Standard,
    /// Building blocks offered to other modules and programs (services, PLAN services,
    /// control services).
    Function,
    /// What users deploy for their own purposes, built on the other three.
    User,
}

impl Category {
    /// Every category, lowest first.
    pub const ALL: [Category; 4] = [
        Category::System,
        Category::Standard,
        Category::Function,
        Category::User,
    ];

    /// The manifest name.
    pub fn name(self) -> &'static str {
        match self {
            Category::System => "system",
            Category::Standard => "standard",
            Category::Function => "function",
            Category::User => "user",
        }
    }

    /// The category of a module of `kind` whose manifest names none: qdiscs and routing
    /// functions are system, services of every kind function, processors user.
    pub fn default_for(kind: Kind) -> Category {
        match kind {
            Kind::Qdisc | Kind::RoutingFunction => Category::System,
            Kind::Service | Kind::PlanService | Kind::ControlService => Category::Function,
            Kind::Processor => Category::User,
            Kind::Ee => Category::Standard,
        }
    }

    /// Whether a module of this category may use a service provided by one of `provider`.
    pub fn may_use(self, provider: Category) -> bool {
        provider <= self
    }
}

/// What a module is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A packet processor at a hook point.
    Processor,
    /// A queue discipline for a link's transmit queue.
    Qdisc,
    /// A building block that only provides services to other modules.
    Service,
    /// A routing function (PLAN `routFun`, capsule routing).
    RoutingFunction,
    /// A PLAN service.
    PlanService,
    /// A control-plane service.
    ControlService,
    /// An execution environment: owns an ANEP Type ID (`type_id`) and gets that type's
    /// packets where the node's EEs get theirs (`runtime.rs`, "Guest ABI").
    Ee,
}

impl Kind {
    /// The manifest name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Processor => "processor",
            Kind::Qdisc => "qdisc",
            Kind::Service => "service",
            Kind::RoutingFunction => "routing-function",
            Kind::PlanService => "plan-service",
            Kind::ControlService => "control-service",
            Kind::Ee => "ee",
        }
    }
}

/// A service a module provides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provides {
    /// The service name.
    pub name: String,
    /// Its version.
    pub version: semver::Version,
}

/// A service a module needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requires {
    /// The service name.
    pub name: String,
    /// The versions that do.
    pub version: semver::VersionReq,
}

/// Resources a module asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// Largest linear memory.
    #[serde(default = "default_memory")]
    pub memory_bytes: usize,
    /// Fuel for one call (one packet, one dequeue).
    #[serde(default = "default_fuel")]
    pub fuel_per_call: u64,
    /// Bytes its files may hold in all (0: it keeps no files).
    #[serde(default)]
    pub file_bytes: usize,
    /// Files it may keep.
    #[serde(default)]
    pub file_count: usize,
}

impl Resources {
    /// The quotas of its files (`anode_capsule::files`), if it asked for any: one file may
    /// hold the whole byte quota; paths as for capsules.
    pub fn file_limits(&self) -> Option<anode_capsule::files::FileLimits> {
        (self.file_bytes > 0 && self.file_count > 0).then(|| anode_capsule::files::FileLimits {
            max_bytes: self.file_bytes,
            max_files: self.file_count,
            max_file_bytes: self.file_bytes,
            ..anode_capsule::files::FileLimits::default()
        })
    }
}

fn default_memory() -> usize {
    1 << 20
}

fn default_fuel() -> u64 {
    100_000
}

impl Default for Resources {
    fn default() -> Self {
        Resources {
            memory_bytes: default_memory(),
            fuel_per_call: default_fuel(),
            file_bytes: 0,
            file_count: 0,
        }
    }
}

/// Most memory a module may ask for.
pub const MAX_MEMORY: usize = 16 << 20;
/// Most bytes of files a module may ask for.
pub const MAX_FILE_BYTES: usize = 16 << 20;
/// Most files a module may ask for.
pub const MAX_FILE_COUNT: usize = 4096;
/// Most fuel a module may ask for per call.
pub const MAX_FUEL: u64 = 10_000_000;

/// One demux key of a filter, as written in the manifest (hex strings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterKey {
    /// Offset from the start of the ANEP packet.
    pub offset: usize,
    /// Value, hex.
    pub value: String,
    /// Mask, hex (default all ones).
    #[serde(default)]
    pub mask: Option<String>,
}

/// A filter: a packet matches when it matches every key (NodeOS demux keys).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    /// The keys.
    pub keys: Vec<FilterKey>,
}

/// The type of a configuration field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    /// A signed 64-bit integer.
    Int,
    /// A boolean (passed to the guest as 0 or 1).
    Bool,
}

/// One field of the configuration schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigField {
    /// Its type.
    #[serde(rename = "type")]
    pub ty: FieldType,
    /// Its value when the node's configuration does not give one.
    pub default: toml::Value,
    /// Smallest value (ints).
    #[serde(default)]
    pub min: Option<i64>,
    /// Largest value (ints).
    #[serde(default)]
    pub max: Option<i64>,
    /// What it means.
    #[serde(default)]
    pub doc: String,
}

/// A module manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The module name: lowercase letters, digits and `-`.
    pub name: String,
    /// Its version.
    pub version: semver::Version,
    /// One line saying what it does, Click style.
    pub summary: String,
    /// What it is.
    pub kind: Kind,
    /// Its place in the service hierarchy; `None`: [`Category::default_for`] its kind (see
    /// [`Manifest::category`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<Category>,
    /// For processors: where it runs.
    #[serde(default)]
    pub hook: Option<String>,
    /// Services it provides.
    #[serde(default)]
    pub provides: Vec<Provides>,
    /// Services it needs.
    #[serde(default)]
    pub requires: Vec<Requires>,
    /// Resources it asks for.
    #[serde(default)]
    pub resources: Resources,
    /// For processors: the packets it wants (any filter matching; no filter: every packet).
    #[serde(default, rename = "filter")]
    pub filters: Vec<Filter>,
    /// The configuration schema.
    #[serde(default)]
    pub config: BTreeMap<String, ConfigField>,
    /// For PLAN services: the service's PLAN type, e.g. `"(string, int list) -> string * int"`.
    /// Absent: `int -> int`, answered by the guest's `plan_call(i64) -> i64`; given, the
    /// guest exports `plan_invoke` and exchanges marshalled PLAN values (`runtime.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_type: Option<String>,
    /// For EEs: the ANEP Type ID whose packets it gets (TOML takes `0x0A10`); 0x0A00 to
    /// 0x0A0F belong to the node's own EEs and protocols.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub type_id: Option<u16>,
}

/// Configuration values of one module instance, validated against its schema.
pub type ConfigValues = BTreeMap<String, i64>;

impl Manifest {
    /// Parses and validates a manifest.
    pub fn parse(src: &str) -> Result<Manifest, ModuleError> {
        let m: Manifest = toml::from_str(src).map_err(|e| ModuleError::Manifest(e.to_string()))?;
        m.validate()?;
        Ok(m)
    }

    /// Checks the rules serde cannot.
    pub fn validate(&self) -> Result<(), ModuleError> {
        let bad = |s: String| Err(ModuleError::Manifest(s));
        if self.name.is_empty()
            || self.name.len() > 64
            || !self
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return bad(format!(
                "name '{}': use 1 to 64 lowercase letters, digits and '-'",
                self.name
            ));
        }
        let s = self.summary.trim();
        if s.is_empty() || s.len() > 100 || s.contains('\n') || !s.ends_with('.') {
            return bad(
                "summary: one line of at most 100 characters ending in '.', saying what the module does"
                    .into(),
            );
        }
        match (self.kind, &self.hook) {
            (Kind::Processor, None) => {
                return bad("a processor needs `hook` (ingress, pre-routing, post-routing or local-delivery)".into());
            }
            (Kind::Processor, Some(h)) if HookPoint::from_name(h).is_none() => {
                return bad(format!(
                    "hook '{h}': use ingress, pre-routing, post-routing or local-delivery"
                ));
            }
            (Kind::Processor, Some(_)) => {}
            (_, Some(_)) => return bad("only processors have a `hook`".into()),
            (_, None) => {}
        }
        if self.kind != Kind::Processor && !self.filters.is_empty() {
            return bad("only processors have filters".into());
        }
        if matches!(self.kind, Kind::Qdisc | Kind::RoutingFunction)
            && self.category() != Category::System
        {
            return bad(format!(
                "a {} changes how the node forwards every packet: its category is \"system\" (leave `category` out, or say \"system\")",
                self.kind.name()
            ));
        }
        if let Some(t) = &self.plan_type {
            if self.kind != Kind::PlanService {
                return bad(
                    "only PLAN services (kind = \"plan-service\") have a `plan_type`".into(),
                );
            }
            match anode_plan::check::scheme_of_type_text(t) {
                Ok(s) if matches!(s.body, anode_plan::types::SchemeBody::Fun(_)) => {}
                Ok(_) => {
                    return bad(format!(
                        "plan_type '{t}' is a value type; a module's PLAN service is a function, e.g. \"(string, int) -> int list\" or \"void -> int\""
                    ));
                }
                Err(e) => {
                    return bad(format!(
                        "plan_type '{t}' is not a PLAN type ({e}); write it as in a PLAN `svc` declaration, e.g. \"(string, int list) -> string * int\""
                    ));
                }
            }
        }
        match (self.kind, self.type_id) {
            (Kind::Ee, None) => {
                return bad("an EE needs `type_id`, the ANEP Type ID it owns (e.g. 0x0A10)".into());
            }
            (Kind::Ee, Some(t)) if t == 0 || (0x0A00..=0x0A0F).contains(&t) => {
                return bad(format!(
                    "type_id 0x{t:04X} is reserved (0 and 0x0A00-0x0A0F belong to the node's own EEs and protocols); pick another, e.g. 0x0A10"
                ));
            }
            (Kind::Ee, Some(_)) | (_, None) => {}
            (_, Some(_)) => return bad("only EEs (kind = \"ee\") have a `type_id`".into()),
        }
        if self.resources.memory_bytes > MAX_MEMORY {
            return bad(format!(
                "resources.memory_bytes {} exceeds the node's limit {MAX_MEMORY}",
                self.resources.memory_bytes
            ));
        }
        if self.resources.fuel_per_call == 0 || self.resources.fuel_per_call > MAX_FUEL {
            return bad(format!("resources.fuel_per_call must be 1 to {MAX_FUEL}"));
        }
        let r = &self.resources;
        if r.file_bytes > MAX_FILE_BYTES || r.file_count > MAX_FILE_COUNT {
            return bad(format!(
                "resources.file_bytes {} / file_count {} exceed the node's limits {MAX_FILE_BYTES} / {MAX_FILE_COUNT}",
                r.file_bytes, r.file_count
            ));
        }
        if (r.file_bytes == 0) != (r.file_count == 0) {
            return bad(
                "resources.file_bytes and file_count go together: give both (a module with files) or neither"
                    .into(),
            );
        }
        self.demux_filters()?;
        for (k, f) in &self.config {
            self.check_value(k, f, &f.default)?;
        }
        Ok(())
    }

    /// Its place in the service hierarchy (the manifest's, or its kind's default).
    pub fn category(&self) -> Category {
        self.category
            .unwrap_or_else(|| Category::default_for(self.kind))
    }

    /// The hook point of a processor.
    pub fn hook_point(&self) -> Option<HookPoint> {
        self.hook.as_deref().and_then(HookPoint::from_name)
    }

    /// The filters as demux keys.
    pub fn demux_filters(&self) -> Result<Vec<Vec<DemuxKey>>, ModuleError> {
        let mut out = Vec::new();
        for (i, f) in self.filters.iter().enumerate() {
            let f = &f.keys;
            if f.is_empty() || f.len() > 8 {
                return Err(ModuleError::Manifest(format!(
                    "filter {}: give 1 to 8 keys",
                    i + 1
                )));
            }
            let mut keys = Vec::new();
            for k in f {
                let value = hex::decode(&k.value).map_err(|e| {
                    ModuleError::Manifest(format!("filter {}: value '{}': {e}", i + 1, k.value))
                })?;
                let mask = match &k.mask {
                    Some(m) => hex::decode(m).map_err(|e| {
                        ModuleError::Manifest(format!("filter {}: mask '{m}': {e}", i + 1))
                    })?,
                    None => vec![0xff; value.len()],
                };
                if value.is_empty() || value.len() > 64 || mask.len() != value.len() {
                    return Err(ModuleError::Manifest(format!(
                        "filter {}: value and mask must be 1 to 64 bytes and equally long",
                        i + 1
                    )));
                }
                if k.offset > 65535 {
                    return Err(ModuleError::Manifest(format!(
                        "filter {}: offset {} is beyond any packet",
                        i + 1,
                        k.offset
                    )));
                }
                keys.push(DemuxKey {
                    offset: k.offset,
                    value,
                    mask,
                });
            }
            out.push(keys);
        }
        Ok(out)
    }

    fn check_value(&self, key: &str, f: &ConfigField, v: &toml::Value) -> Result<i64, ModuleError> {
        let err = |reason: String| ModuleError::Config {
            name: self.name.clone(),
            reason,
        };
        let n = match (f.ty, v) {
            (FieldType::Int, toml::Value::Integer(i)) => *i,
            (FieldType::Bool, toml::Value::Boolean(b)) => i64::from(*b),
            _ => {
                return Err(err(format!(
                    "`{key}` must be {}",
                    match f.ty {
                        FieldType::Int => "an integer",
                        FieldType::Bool => "true or false",
                    }
                )));
            }
        };
        if f.min.is_some_and(|m| n < m) || f.max.is_some_and(|m| n > m) {
            return Err(err(format!(
                "`{key}` = {n} is outside {}..={}",
                f.min.map_or("".into(), |m| m.to_string()),
                f.max.map_or("".into(), |m| m.to_string())
            )));
        }
        Ok(n)
    }

    /// Validates `given` against the schema and fills in defaults.
    pub fn configure(&self, given: &toml::Table) -> Result<ConfigValues, ModuleError> {
        for k in given.keys() {
            if !self.config.contains_key(k) {
                let known: Vec<&str> = self.config.keys().map(String::as_str).collect();
                return Err(ModuleError::Config {
                    name: self.name.clone(),
                    reason: format!("unknown key `{k}` (the schema has: {})", known.join(", ")),
                });
            }
        }
        let mut out = ConfigValues::new();
        for (k, f) in &self.config {
            let v = given.get(k).unwrap_or(&f.default);
            out.insert(k.clone(), self.check_value(k, f, v)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "name = \"s\"\nversion = \"1.0.0\"\nsummary = \"Does it.\"\n";

    #[test]
    fn plan_type_is_a_plan_function_type_of_plan_services_only() {
        let ok = Manifest::parse(&format!(
            "{HEAD}kind = \"plan-service\"\nplan_type = \"(string, int list) -> string * int\"\n"
        ))
        .unwrap();
        assert_eq!(
            ok.plan_type.as_deref(),
            Some("(string, int list) -> string * int")
        );
        let err = |extra: &str| {
            Manifest::parse(&format!("{HEAD}{extra}"))
                .unwrap_err()
                .to_string()
        };
        let e = err("kind = \"service\"\nplan_type = \"int -> int\"\n");
        assert!(e.contains("only PLAN services"), "{e}");
        let e = err("kind = \"plan-service\"\nplan_type = \"int ->\"\n");
        assert!(e.contains("is not a PLAN type"), "{e}");
        let e = err("kind = \"plan-service\"\nplan_type = \"int list\"\n");
        assert!(e.contains("is a value type"), "{e}");
    }

    #[test]
    fn an_ee_owns_a_type_id_outside_the_nodes_own() {
        let ok = Manifest::parse(&format!("{HEAD}kind = \"ee\"\ntype_id = 0x0A10\n")).unwrap();
        assert_eq!(ok.type_id, Some(0x0A10));
        assert_eq!(ok.category(), Category::Standard);
        let err = |extra: &str| {
            Manifest::parse(&format!("{HEAD}{extra}"))
                .unwrap_err()
                .to_string()
        };
        let e = err("kind = \"ee\"\n");
        assert!(e.contains("needs `type_id`"), "{e}");
        for reserved in ["0x0A03", "0x0A00", "0x0A0F", "0"] {
            let e = err(&format!("kind = \"ee\"\ntype_id = {reserved}\n"));
            assert!(e.contains("is reserved"), "{reserved}: {e}");
        }
        let e = err("kind = \"service\"\ntype_id = 0x0A10\n");
        assert!(e.contains("only EEs"), "{e}");
        let e = err("kind = \"ee\"\ntype_id = 0x10000\n");
        assert!(e.contains("type_id"), "{e}");
    }
}
