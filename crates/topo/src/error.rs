//! Why an import or a generation failed. Every variant carries its reason; messages say
//! where (`file:line:col`, or `file: edges[3].source` in JSON) and what to change.

/// Why an import or a generation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TopoError {
    /// The text is not well-formed GML or JSON.
    #[error("{file}:{line}:{col}: {reason}")]
    Syntax {
        /// The file as the caller named it.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        col: usize,
        /// What is wrong there.
        reason: SyntaxError,
    },
    /// Well-formed, but not a graph that makes a network.
    #[error("{file}: {at}{reason}")]
    Graph {
        /// The file as the caller named it.
        file: String,
        /// Where: `line:col: ` (GML), `edges[3].source: ` (JSON) or empty (the whole graph).
        at: String,
        /// What is wrong.
        reason: GraphError,
    },
    /// A generator or option parameter is out of range.
    #[error("{0}")]
    Param(#[from] ParamError),
}

/// What is malformed in GML or JSON text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SyntaxError {
    /// A character that starts no GML token.
    #[error(
        "unexpected character {0:?}: GML has keys (names), numbers, \"strings\", [ and ], and # comments"
    )]
    UnexpectedChar(char),
    /// A string without its closing quote.
    #[error("this string is never closed: add the closing '\"'")]
    UnterminatedString,
    /// A token that starts like a number but is not one.
    #[error("'{0}' is not a number")]
    BadNumber(String),
    /// A key followed by something other than a value.
    #[error("key '{key}' has no value (found {found}): give a number, a \"string\" or a [ list ]")]
    ExpectedValue {
        /// The key.
        key: String,
        /// What came instead.
        found: String,
    },
    /// A value where a key was expected.
    #[error("expected a key (a name such as node or edge), found {found}")]
    ExpectedKey {
        /// What came instead.
        found: String,
    },
    /// A list that is still open at the end of the text.
    #[error("the list '{key} [' opened at {line}:{col} is never closed: add a ']'")]
    UnclosedList {
        /// The list's key.
        key: String,
        /// Where it opened (1-based).
        line: usize,
        /// Where it opened (1-based column).
        col: usize,
    },
    /// A `]` with no list open.
    #[error("']' closes no list: remove it or add the missing 'key ['")]
    UnexpectedClose,
    /// Lists nested deeper than the parser follows.
    #[error("lists are nested more than {0} deep")]
    TooDeep(usize),
    /// serde_json's reason.
    #[error("not valid JSON: {0}")]
    Json(String),
}

/// Why a well-formed file is not a usable graph.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GraphError {
    /// GML without a `graph [ ... ]` list.
    #[error("there is no 'graph [ ... ]' list: not a GML graph")]
    NoGraph,
    /// JSON that is not a node-link object.
    #[error(
        "not a node-link graph: expected an object with a \"nodes\" array (networkx node_link_data)"
    )]
    NotNodeLink,
    /// A required key is missing.
    #[error("this {what} has no '{key}'")]
    MissingKey {
        /// `node` or `edge`.
        what: &'static str,
        /// The key.
        key: &'static str,
    },
    /// A key has a value of the wrong kind.
    #[error("'{key}' must be {want}")]
    WrongType {
        /// The key.
        key: String,
        /// What it must be.
        want: &'static str,
    },
    /// Two nodes with the same id.
    #[error("node id {0} is used twice: give every node its own id")]
    DuplicateId(String),
    /// An edge end that names no node.
    #[error("edge {end} {id} is not the id of any node")]
    UnknownNode {
        /// `source` or `target`.
        end: &'static str,
        /// The id as written.
        id: String,
    },
    /// Fewer than two nodes once cleaned.
    #[error(
        "{nodes} node(s) left after cleaning (self-loops dropped, largest connected part kept); an emulated network needs at least 2"
    )]
    TooFewNodes {
        /// How many were left.
        nodes: usize,
    },
    /// More nodes than the emulator takes.
    #[error("{nodes} nodes is more than the emulator takes (at most {max})")]
    TooManyNodes {
        /// How many.
        nodes: usize,
        /// The limit.
        max: usize,
    },
}

/// A parameter out of range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    /// A value outside its range.
    #[error("{param} = {value} is out of range: give {want}")]
    Range {
        /// The parameter, as the CLI spells it.
        param: &'static str,
        /// The value given.
        value: String,
        /// What is accepted.
        want: &'static str,
    },
    /// A fat tree needs an even k.
    #[error(
        "fat-tree --k {0}: k must be even (and at least 2): pods have k/2 edge and k/2 aggregation switches"
    )]
    OddK(u64),
    /// Barabási–Albert needs more nodes than links per new node.
    #[error(
        "ba --m {m} with --nodes {nodes}: each new node links to m earlier ones, so give m >= 1 and nodes > m"
    )]
    BaM {
        /// Links per new node.
        m: u64,
        /// Nodes.
        nodes: u64,
    },
    /// The graph would have more links than a topology file should hold.
    #[error(
        "{what} makes {links} links or more; at most {max} (give fewer nodes or sparser parameters)"
    )]
    TooManyLinks {
        /// The kind and its parameters.
        what: String,
        /// How many links (or a lower bound).
        links: u128,
        /// The limit.
        max: usize,
    },
    /// The graph would have more nodes than the emulator takes.
    #[error("{what} makes {nodes} nodes; the emulator takes at most {max}")]
    TooManyNodes {
        /// The kind and its size parameters.
        what: String,
        /// How many nodes it would make.
        nodes: u128,
        /// The limit.
        max: usize,
    },
}
