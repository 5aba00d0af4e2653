-- anode.lua: a Wireshark / tshark dissector for anode's wire protocols.
--
-- anode nodes exchange ANEP packets (Active Network Encapsulation Protocol) in UDP datagrams,
-- by default on port 3322. This script decodes, exactly as the Rust code in crates/wire and
-- crates/plan defines them:
--
--   ANEP basic header + options          crates/wire/src/anep.rs        (protocol "anep")
--   transit header (routed Type IDs)     crates/wire/src/transit.rs     (protocol "anode")
--   capsule header                       crates/wire/src/capsule.rs
--   datagram header                      crates/wire/src/datagram.rs
--   PLAN body and marshalled chunk       crates/plan/src/packet.rs, crates/plan/src/marshal.rs
--   control messages                     crates/wire/src/control.rs
--   deploy requests, results, transfer   crates/wire/src/deploy.rs
--
-- Node addresses inside anode headers are 18 bytes (IPv6 or IPv4-mapped IPv6, then the port),
-- crates/wire/src/addr.rs; they are shown as "198.18.0.1:3322" / "[2001:2::1]:3322".
--
-- Everything the Rust parsers reject is flagged with expert info of group Malformed, severity
-- Error (filter: _ws.expert.severity == error, or anep.malformed / anode.malformed). The
-- dissector never reads outside the captured bytes, so truncated or garbled input gives expert
-- info, never a Lua error.
--
-- Install: copy to ~/.local/lib/wireshark/plugins/ or run tshark -X lua_script:anode.lua.
-- See tools/wireshark/README.md.

local anep = Proto("anep", "Active Network Encapsulation Protocol")
local anode = Proto("anode", "anode Active Network")

---------------------------------------------------------------------------------------------
-- Constants (crates/wire, crates/plan)

local ANEP_VERSION = 1
local BASIC_HEADER_LEN = 8
local FLAG_DISCARD_UNKNOWN = 0x80

local TYPE_CONTROL = 0x0A01
local TYPE_DATAGRAM = 0x0A02
local TYPE_CAPSULE = 0x0A03
local TYPE_PLAN = 0x0A04
local TYPE_DEPLOY = 0x0A05

local type_names = {
    [TYPE_CONTROL] = "Control",
    [TYPE_DATAGRAM] = "Datagram",
    [TYPE_CAPSULE] = "Capsule",
    [TYPE_PLAN] = "PLAN",
    [TYPE_DEPLOY] = "Deploy",
}

local OPT_SOURCE, OPT_DEST, OPT_CHECKSUM, OPT_AUTH = 1, 2, 3, 4
local option_names = {
    [OPT_SOURCE] = "Source identifier",
    [OPT_DEST] = "Destination identifier",
    [OPT_CHECKSUM] = "Integrity checksum",
    [OPT_AUTH] = "Authentication",
}
local addr_type_names = { [1] = "IPv4", [2] = "IPv6" }

local NODE_ADDR_LEN = 18
local TRANSIT_VERSION = 1
local TRANSIT_LEN = 72
local CAPSULE_VERSION = 1
local CAPSULE_LEN = 56
local DATAGRAM_LEN = 4

local PLAN_MAGIC = 0xA7
local PLAN_VERSION = 1
local MAX_VALUE_DEPTH = 48
local MAX_DECODE_LEN = 1048576

local CONTROL_VERSION = 1
local MAX_SEEN = 64
local MAX_ROUTES = 64
local K_HELLO, K_ROUTES, K_CODE_REQUEST, K_CODE_CHUNK, K_CODE_UNAVAILABLE, K_EE = 1, 2, 3, 4, 5, 6
local control_kinds = {
    [K_HELLO] = "Hello",
    [K_ROUTES] = "Routes",
    [K_CODE_REQUEST] = "CodeRequest",
    [K_CODE_CHUNK] = "CodeChunk",
    [K_CODE_UNAVAILABLE] = "CodeUnavailable",
    [K_EE] = "Ee",
}

local code_kinds = { [0] = "none (the entry is a service)", [1] = "program text", [2] = "SHA-256 of the program text" }

---------------------------------------------------------------------------------------------
-- Fields

local F = {}
-- ANEP
F.version = ProtoField.uint8("anep.version", "Version", base.DEC)
F.flags = ProtoField.uint8("anep.flags", "Flags", base.HEX)
F.flag_discard = ProtoField.bool("anep.flags.discard_unknown", "Discard if Type ID unknown", 8,
    { "discard", "forward toward the destination" }, FLAG_DISCARD_UNKNOWN)
F.type = ProtoField.uint16("anep.type", "Type ID", base.HEX, type_names)
F.hdr_len = ProtoField.uint16("anep.hdr_len", "Header length (32-bit words)", base.DEC)
F.pkt_len = ProtoField.uint16("anep.pkt_len", "Packet length", base.DEC)
F.option = ProtoField.none("anep.option", "Option")
F.opt_type = ProtoField.uint16("anep.option.type", "Option type", base.DEC, option_names)
F.opt_len = ProtoField.uint16("anep.option.len", "Option length (32-bit words)", base.DEC)
F.opt_source = ProtoField.string("anep.option.source", "Source identifier")
F.opt_dest = ProtoField.string("anep.option.dest", "Destination identifier")
F.opt_addr_type = ProtoField.uint16("anep.option.addr_type", "Address type", base.DEC, addr_type_names)
F.opt_port = ProtoField.uint16("anep.option.port", "Port", base.DEC)
F.opt_ip = ProtoField.ipv4("anep.option.ip", "IPv4 address")
F.opt_ipv6 = ProtoField.ipv6("anep.option.ipv6", "IPv6 address")
F.opt_checksum = ProtoField.uint16("anep.option.checksum", "Checksum", base.HEX)
F.opt_checksum_status = ProtoField.string("anep.option.checksum.status", "Checksum status")
F.opt_checksum_zero = ProtoField.uint16("anep.option.checksum.zero", "Zero", base.HEX)
F.opt_auth_scheme = ProtoField.uint16("anep.option.auth.scheme", "Authentication scheme", base.DEC)
F.opt_auth_len = ProtoField.uint16("anep.option.auth.len", "Authentication data length", base.DEC)
F.opt_auth_data = ProtoField.bytes("anep.option.auth.data", "Authentication data")
F.opt_pad = ProtoField.bytes("anep.option.pad", "Padding")
F.opt_value = ProtoField.bytes("anep.option.value", "Value")
F.payload = ProtoField.bytes("anep.payload", "Payload")
F.trailer = ProtoField.bytes("anep.trailer", "Bytes after the ANEP packet length")

anep.fields = {
    F.version, F.flags, F.flag_discard, F.type, F.hdr_len, F.pkt_len, F.option, F.opt_type,
    F.opt_len, F.opt_source, F.opt_dest, F.opt_addr_type, F.opt_port, F.opt_ip, F.opt_ipv6,
    F.opt_checksum, F.opt_checksum_status, F.opt_checksum_zero, F.opt_auth_scheme,
    F.opt_auth_len, F.opt_auth_data, F.opt_pad, F.opt_value, F.payload, F.trailer,
}

local A = {}
-- node address parts (under every address item)
A.addr_ip = ProtoField.ipv4("anode.addr.ip", "IPv4 address")
A.addr_ip6 = ProtoField.ipv6("anode.addr.ip6", "IPv6 address")
A.addr_port = ProtoField.uint16("anode.addr.port", "Port", base.DEC)
-- transit header
A.transit = ProtoField.none("anode.transit", "Transit header")
A.t_version = ProtoField.uint8("anode.transit.version", "Version", base.DEC)
A.t_flags = ProtoField.uint8("anode.transit.flags", "Flags", base.HEX)
A.t_flag_eval = ProtoField.bool("anode.transit.flags.eval_every_hop", "Evaluate at every hop", 8, nil, 0x01)
A.t_flag_ee_route = ProtoField.bool("anode.transit.flags.ee_route", "EE routing function chooses the next hop", 8, nil, 0x02)
A.t_hdr_len = ProtoField.uint16("anode.transit.hdr_len", "Header length", base.DEC)
A.t_rb = ProtoField.uint16("anode.transit.rb", "Resource bound", base.DEC)
A.t_reserved = ProtoField.uint16("anode.transit.reserved", "Reserved", base.HEX)
A.t_flow = ProtoField.uint64("anode.transit.flow", "Flow id", base.HEX)
A.t_src = ProtoField.string("anode.transit.src", "Source")
A.t_dst = ProtoField.string("anode.transit.dst", "Destination")
A.t_prev = ProtoField.string("anode.transit.prev_hop", "Previous hop")
A.t_pad = ProtoField.bytes("anode.transit.pad", "Padding")
A.t_ext = ProtoField.bytes("anode.transit.ext", "Header extension (later version)")
-- capsule header
A.capsule = ProtoField.none("anode.capsule", "Capsule header")
A.c_version = ProtoField.uint8("anode.capsule.version", "Version", base.DEC)
A.c_flags = ProtoField.uint8("anode.capsule.flags", "Flags", base.HEX)
A.c_hdr_len = ProtoField.uint16("anode.capsule.hdr_len", "Header length", base.DEC)
A.c_code = ProtoField.bytes("anode.capsule.code", "Code (SHA-256 of the WebAssembly module)")
A.c_source = ProtoField.string("anode.capsule.source", "Code source")
A.c_pad = ProtoField.bytes("anode.capsule.pad", "Padding")
A.c_ext = ProtoField.bytes("anode.capsule.ext", "Header extension (later version)")
A.c_payload = ProtoField.bytes("anode.capsule.payload", "Payload")
A.c_payload_len = ProtoField.uint32("anode.capsule.payload_len", "Payload length", base.DEC)
-- datagram header
A.datagram = ProtoField.none("anode.datagram", "Datagram header")
A.d_port = ProtoField.uint16("anode.datagram.port", "Application port", base.DEC)
A.d_reserved = ProtoField.uint16("anode.datagram.reserved", "Reserved", base.HEX)
A.d_payload = ProtoField.bytes("anode.datagram.payload", "Payload")
A.d_payload_len = ProtoField.uint32("anode.datagram.payload_len", "Payload length", base.DEC)
-- PLAN body
A.plan = ProtoField.none("anode.plan", "PLAN body")
A.p_eval_dest = ProtoField.string("anode.plan.eval_dest", "evalDest")
A.p_source = ProtoField.string("anode.plan.source", "Source")
A.p_rb = ProtoField.uint16("anode.plan.rb", "Resource bound", base.DEC)
A.p_magic = ProtoField.uint8("anode.plan.magic", "Magic", base.HEX)
A.p_version = ProtoField.uint8("anode.plan.version", "Version", base.DEC)
A.p_session = ProtoField.uint32("anode.plan.session", "Session", base.DEC)
A.p_route_fun_len = ProtoField.uint8("anode.plan.route_fun_len", "routFun length", base.DEC)
A.p_route_fun = ProtoField.string("anode.plan.route_fun", "Routing function (routFun)")
A.p_handler_len = ProtoField.uint8("anode.plan.handler_len", "Handler length", base.DEC)
A.p_handler = ProtoField.string("anode.plan.handler", "Error handler")
A.p_chunk_len = ProtoField.uint32("anode.plan.chunk_len", "Chunk length", base.DEC)
A.p_chunk = ProtoField.none("anode.plan.chunk", "Chunk")
A.p_code_kind = ProtoField.uint8("anode.plan.code_kind", "Code", base.DEC, code_kinds)
A.p_code_len = ProtoField.uint32("anode.plan.code_len", "Code text length", base.DEC)
A.p_code_text = ProtoField.string("anode.plan.code_text", "Code text")
A.p_code_hash = ProtoField.bytes("anode.plan.code_hash", "Code hash (SHA-256 of the text)")
A.p_entry = ProtoField.string("anode.plan.entry", "Entry function")
A.p_argc = ProtoField.uint32("anode.plan.argc", "Argument count", base.DEC)
A.p_arg = ProtoField.string("anode.plan.arg", "Argument")
A.p_value = ProtoField.string("anode.plan.value", "Value")
A.p_trailing = ProtoField.bytes("anode.plan.trailing", "Bytes after the chunk")
-- control messages
A.control = ProtoField.none("anode.control", "Control message")
A.k_kind = ProtoField.uint8("anode.control.kind", "Kind", base.DEC, control_kinds)
A.k_version = ProtoField.uint8("anode.control.version", "Version", base.DEC)
A.k_len = ProtoField.uint16("anode.control.len", "Body length", base.DEC)
A.k_pad = ProtoField.bytes("anode.control.pad", "Padding")
A.k_extra = ProtoField.bytes("anode.control.extra", "Body extension (later version)")
A.k_trailing = ProtoField.bytes("anode.control.trailing", "Bytes after the control body")
A.h_sender = ProtoField.string("anode.control.hello.sender", "Sender")
A.h_interval = ProtoField.uint32("anode.control.hello.interval", "Hello interval (ms)", base.DEC)
A.h_dead = ProtoField.uint32("anode.control.hello.dead", "Dead interval (ms)", base.DEC)
A.h_seq = ProtoField.uint32("anode.control.hello.seq", "Sequence number", base.DEC)
A.h_count = ProtoField.uint16("anode.control.hello.count", "Neighbors heard", base.DEC)
A.h_seen = ProtoField.string("anode.control.hello.seen", "Heard neighbor")
A.r_sender = ProtoField.string("anode.control.routes.sender", "Sender")
A.r_seq = ProtoField.uint16("anode.control.routes.seq", "Sequence number", base.DEC)
A.r_count = ProtoField.uint16("anode.control.routes.count", "Entry count", base.DEC)
A.r_flags = ProtoField.uint16("anode.control.routes.flags", "Flags", base.HEX)
A.r_full_first = ProtoField.bool("anode.control.routes.flags.full_first", "First of a full table", 16, nil, 0x0001)
A.r_full_last = ProtoField.bool("anode.control.routes.flags.full_last", "Last of a full table", 16, nil, 0x0002)
A.r_digest = ProtoField.bool("anode.control.routes.flags.digest", "Digest (nothing changed)", 16, nil, 0x0004)
A.r_request = ProtoField.bool("anode.control.routes.flags.request", "Request for the full table", 16, nil, 0x0008)
A.r_entry = ProtoField.none("anode.control.routes.entry", "Route")
A.r_dest = ProtoField.string("anode.control.routes.dest", "Destination")
A.r_metric = ProtoField.uint16("anode.control.routes.metric", "Metric", base.DEC)
A.code_hash = ProtoField.bytes("anode.control.code.hash", "Code object (SHA-256)")
A.code_offset = ProtoField.uint32("anode.control.code.offset", "Offset", base.DEC)
A.code_max = ProtoField.uint32("anode.control.code.max", "Most bytes wanted", base.DEC)
A.code_total = ProtoField.uint32("anode.control.code.total", "Object size", base.DEC)
A.code_len = ProtoField.uint16("anode.control.code.len", "Chunk length", base.DEC)
A.code_data = ProtoField.bytes("anode.control.code.data", "Chunk data")
A.ee_type = ProtoField.uint16("anode.control.ee.type", "EE Type ID", base.HEX, type_names)
A.ee_data = ProtoField.bytes("anode.control.ee.data", "EE data")
-- module deployment along a path (crates/wire/src/deploy.rs)
local deploy_kinds = { [1] = "request", [2] = "result", [3] = "transfer" }
local deploy_ops = { [1] = "deploy", [2] = "undeploy" }
local deploy_outcomes = { [1] = "installed", [2] = "present", [3] = "refused", [4] = "failed",
    [5] = "removed", [6] = "absent" }
local transfer_kinds = { [1] = "want", [2] = "chunk", [3] = "unavailable" }
A.deploy = ProtoField.none("anode.deploy", "Deploy message")
A.dp_version = ProtoField.uint8("anode.deploy.version", "Version", base.DEC)
A.dp_kind = ProtoField.uint8("anode.deploy.kind", "Kind", base.DEC, deploy_kinds)
A.dp_op = ProtoField.uint8("anode.deploy.op", "Operation", base.DEC, deploy_ops)
A.dp_hop = ProtoField.uint8("anode.deploy.hop", "Hop (nodes of the service before)", base.DEC)
A.dp_reply_port = ProtoField.uint16("anode.deploy.reply_port", "Reply port", base.DEC)
A.dp_ttl = ProtoField.uint32("anode.deploy.ttl", "Lifetime (s)", base.DEC)
A.dp_pkg_len = ProtoField.uint32("anode.deploy.pkg_len", "Package length", base.DEC)
A.dp_expires = ProtoField.uint64("anode.deploy.expires", "Expires (Unix ms)", base.DEC)
A.dp_nonce = ProtoField.bytes("anode.deploy.nonce", "Nonce")
A.dp_origin = ProtoField.string("anode.deploy.origin", "Origin")
A.dp_target = ProtoField.string("anode.deploy.target", "Target")
A.dp_pkg_hash = ProtoField.bytes("anode.deploy.pkg_hash", "Package (SHA-256)")
A.dp_signer = ProtoField.bytes("anode.deploy.signer", "Signer (ed25519 public key)")
A.dp_signature = ProtoField.bytes("anode.deploy.signature", "Signature")
A.dp_via = ProtoField.string("anode.deploy.via", "Via (last node holding the package)")
A.dp_module = ProtoField.string("anode.deploy.module", "Module")
A.dp_module_version = ProtoField.string("anode.deploy.module_version", "Module version")
A.dp_repo = ProtoField.string("anode.deploy.repo", "Repository (nodes fetch the package from it)")
A.dp_outcome = ProtoField.uint8("anode.deploy.outcome", "Outcome", base.DEC, deploy_outcomes)
A.dp_elapsed = ProtoField.uint32("anode.deploy.elapsed_us", "Time at the node (us)", base.DEC)
A.dp_last = ProtoField.bool("anode.deploy.target_answer", "From the target", 32, nil, 0x1)
A.dp_node = ProtoField.string("anode.deploy.node", "Node")
A.dp_reason = ProtoField.string("anode.deploy.reason", "Reason")
A.dp_transfer = ProtoField.uint8("anode.deploy.transfer", "Transfer", base.DEC, transfer_kinds)
A.dp_offset = ProtoField.uint32("anode.deploy.offset", "Offset", base.DEC)
A.dp_count = ProtoField.uint32("anode.deploy.count", "Most bytes wanted / package length", base.DEC)
A.dp_data = ProtoField.bytes("anode.deploy.data", "Chunk data")

do
    local list = {}
    for _, f in pairs(A) do list[#list + 1] = f end
    anode.fields = list
end

---------------------------------------------------------------------------------------------
-- Expert info

local E = {
    anep_malformed = ProtoExpert.new("anep.malformed", "Malformed ANEP packet",
        expert.group.MALFORMED, expert.severity.ERROR),
    anep_bad_checksum = ProtoExpert.new("anep.checksum.bad", "Bad ANEP integrity checksum",
        expert.group.CHECKSUM, expert.severity.ERROR),
    anep_unknown_type = ProtoExpert.new("anep.type.unknown", "ANEP Type ID not known to anode",
        expert.group.UNDECODED, expert.severity.NOTE),
    anep_unknown_option = ProtoExpert.new("anep.option.unknown", "Unknown ANEP option (skipped)",
        expert.group.UNDECODED, expert.severity.NOTE),
    anep_trailer = ProtoExpert.new("anep.trailer.present", "Bytes after the ANEP packet length (ignored)",
        expert.group.PROTOCOL, expert.severity.NOTE),
    anep_snapped = ProtoExpert.new("anep.snapped", "Packet size limited during capture",
        expert.group.UNDECODED, expert.severity.WARN),
    anode_malformed = ProtoExpert.new("anode.malformed", "Malformed anode header",
        expert.group.MALFORMED, expert.severity.ERROR),
    anode_ext = ProtoExpert.new("anode.extension", "Header longer than version 1 (extension skipped)",
        expert.group.PROTOCOL, expert.severity.NOTE),
}
anep.experts = { E.anep_malformed, E.anep_bad_checksum, E.anep_unknown_type, E.anep_unknown_option,
    E.anep_trailer, E.anep_snapped }
anode.experts = { E.anode_malformed, E.anode_ext }

---------------------------------------------------------------------------------------------
-- Preferences

anep.prefs.ports = Pref.range("UDP ports", "3322",
    "UDP ports decoded as ANEP (the heuristic dissector finds ANEP on other ports too)", 65535)
anep.prefs.heuristic = Pref.bool("Heuristic dissector",
    true, "Recognize ANEP on any UDP port by its header (version 1 and a known Type ID)")
anep.prefs.verify_checksum = Pref.bool("Verify the integrity checksum option", true,
    "Check the ANEP integrity checksum option when the whole packet is captured")
anode.prefs.infinity = Pref.uint("Routing metric infinity", 16,
    "Route metrics at or above this are shown as unreachable (the routing config's infinity)")

---------------------------------------------------------------------------------------------
-- Helpers

local fmt = string.format
local band = bit32.band

local function hex(s)
    return (s:gsub(".", function(c) return fmt("%02x", c:byte()) end))
end

-- "3fa2c1d0…" from the 32 bytes of a hash.
local function short_hash(tvb, off)
    return hex(tvb:raw(off, 4)) .. "…"
end

local function v6_string(b, first)
    -- RFC 5952 text of the 16 bytes b[first..first+15] (as Rust's Ipv6Addr prints it).
    local g = {}
    for i = 0, 7 do g[i + 1] = b[first + 2 * i] * 256 + b[first + 2 * i + 1] end
    local best_at, best_len, run_at, run_len = 0, 0, 0, 0
    for i = 1, 8 do
        if g[i] == 0 then
            if run_len == 0 then run_at = i end
            run_len = run_len + 1
            if run_len > best_len then best_at, best_len = run_at, run_len end
        else
            run_len = 0
        end
    end
    local parts = {}
    if best_len >= 2 then
        local left, right = {}, {}
        for i = 1, best_at - 1 do left[#left + 1] = fmt("%x", g[i]) end
        for i = best_at + best_len, 8 do right[#right + 1] = fmt("%x", g[i]) end
        return table.concat(left, ":") .. "::" .. table.concat(right, ":")
    end
    for i = 1, 8 do parts[i] = fmt("%x", g[i]) end
    return table.concat(parts, ":")
end

-- Text of the 18-byte node address at off (caller checked it is captured), and whether it
-- is IPv4-mapped and whether it is the unspecified address [::]:0.
local function node_addr(tvb, off)
    local b = { tvb:raw(off, NODE_ADDR_LEN):byte(1, NODE_ADDR_LEN) }
    local port = b[17] * 256 + b[18]
    local zero10 = true
    for i = 1, 10 do if b[i] ~= 0 then zero10 = false end end
    if zero10 and b[11] == 0xff and b[12] == 0xff then
        return fmt("%d.%d.%d.%d:%d", b[13], b[14], b[15], b[16], port), true, false
    end
    local unspecified = port == 0
    for i = 1, 16 do if b[i] ~= 0 then unspecified = false end end
    return "[" .. v6_string(b, 1) .. "]:" .. port, false, unspecified
end

-- Adds the node address at off as field f with its IP and port beneath; returns its text.
local function add_node_addr(tree, f, tvb, off, label)
    local s, is4, unspecified = node_addr(tvb, off)
    local it = tree:add(f, tvb(off, NODE_ADDR_LEN), s)
    if label then it:append_text(label) end
    if is4 then
        it:add(A.addr_ip, tvb(off + 12, 4))
    else
        it:add(A.addr_ip6, tvb(off, 16))
    end
    it:add(A.addr_port, tvb(off + 16, 2))
    return s, it, unspecified
end

-- One's-complement sum of the bytes as big-endian 16-bit words, folded (RFC 1071).
local function inet_sum(raw)
    local acc = 0
    local n = #raw
    local i = 1
    while i + 1 <= n do
        local a, b = raw:byte(i, i + 1)
        acc = acc + a * 256 + b
        i = i + 2
    end
    if i == n then acc = acc + raw:byte(i) * 256 end
    while acc > 0xffff do acc = (acc % 0x10000) + math.floor(acc / 0x10000) end
    return acc
end

-- Strict UTF-8 check (as Rust's str::from_utf8: no overlongs, surrogates or > U+10FFFF).
local function valid_utf8(s)
    local i, n = 1, #s
    while i <= n do
        local c = s:byte(i)
        if c < 0x80 then
            i = i + 1
        else
            local len, lo, hi
            local c2 = s:byte(i + 1)
            if c2 == nil then return false end
            if c >= 0xC2 and c <= 0xDF then
                len, lo, hi = 2, 0x80, 0xBF
            elseif c == 0xE0 then
                len, lo, hi = 3, 0xA0, 0xBF
            elseif (c >= 0xE1 and c <= 0xEC) or c == 0xEE or c == 0xEF then
                len, lo, hi = 3, 0x80, 0xBF
            elseif c == 0xED then
                len, lo, hi = 3, 0x80, 0x9F
            elseif c == 0xF0 then
                len, lo, hi = 4, 0x90, 0xBF
            elseif c >= 0xF1 and c <= 0xF3 then
                len, lo, hi = 4, 0x80, 0xBF
            elseif c == 0xF4 then
                len, lo, hi = 4, 0x80, 0x8F
            else
                return false
            end
            if c2 < lo or c2 > hi then return false end
            for k = 2, len - 1 do
                local ck = s:byte(i + k)
                if ck == nil or ck < 0x80 or ck > 0xBF then return false end
            end
            i = i + len
        end
    end
    return true
end

local function is_alpha(c) return (c >= 65 and c <= 90) or (c >= 97 and c <= 122) end
local function is_digit(c) return c >= 48 and c <= 57 end

-- PLAN identifier (crates/plan/src/packet.rs ident_ok, marshal.rs valid_func_name).
local function ident_ok(s, allow_empty)
    if #s == 0 then return allow_empty end
    local c = s:byte(1)
    if not (is_alpha(c) or c == 95) then return false end
    for i = 2, #s do
        c = s:byte(i)
        if not (is_alpha(c) or is_digit(c) or c == 95 or c == 39) then return false end
    end
    return true
end

-- s as it may go into a string field: unchanged if valid UTF-8 without control characters
-- (newlines and tabs allowed), else with every byte outside printable ASCII escaped.
local function printable(s)
    if valid_utf8(s) and not s:find("[\0-\8\11\12\14-\31\127]") then return s end
    return (s:gsub("[^\32-\126]", function(c) return fmt("\\x%02x", c:byte()) end))
end

local function clip(s, n)
    if #s > n then return s:sub(1, n) .. "…" end
    return s
end

-- Per-packet dissection state. `limit` is where the captured bytes of the ANEP packet end;
-- `pkt_end` where the packet ends by its packet length (or the datagram, if shorter).
local Ctx = {}
Ctx.__index = Ctx

local function new_ctx(tvb, pinfo, root)
    return setmetatable({ tvb = tvb, pinfo = pinfo, root = root, limit = 0, pkt_end = 0,
        snapped = false, snap_noted = false, errors = 0 }, Ctx)
end

function Ctx:malformed(item, expert_field, msg)
    self.errors = self.errors + 1
    item:add_proto_expert_info(expert_field, msg)
end

-- True if [off, off+n) is inside the packet and captured; otherwise adds expert info to
-- item: "<what> truncated" (malformed) or, if only the capture length cut it, a warning.
function Ctx:need(item, off, n, what, ef)
    if off + n <= self.limit then return true end
    if self.snapped and off + n <= self.pkt_end then
        if not self.snap_noted then
            self.snap_noted = true
            item:add_proto_expert_info(E.anep_snapped, fmt(
                "Packet size limited during capture: %s not captured (decoding stops)", what))
        end
        return false
    end
    self:malformed(item, ef or E.anode_malformed, fmt("%s truncated: needs %d bytes at offset %d, the packet ends at %d",
        what, n, off, self.pkt_end))
    return false
end

-- The captured part of [off, off+n) as a range (possibly empty, never out of bounds).
function Ctx:range(off, n)
    local cap = self.tvb:len()
    if off > cap then off = cap end
    if n < 0 then n = 0 end
    if off + n > cap then n = cap - off end
    return self.tvb(off, n)
end

-- Adds the captured bytes [off, min(stop, limit)) as field f, if there are any.
function Ctx:add_bytes(tree, f, off, stop)
    local n = math.min(stop, self.limit) - off
    if n <= 0 then return nil end
    return tree:add(f, self:range(off, n))
end

---------------------------------------------------------------------------------------------
-- Transit header

local function dissect_transit(ctx, tree, off)
    local tvb = ctx.tvb
    local t = tree:add(A.transit, ctx:range(off, math.min(TRANSIT_LEN, ctx.limit - off)))
    if not ctx:need(t, off, 1, "transit header") then return nil end
    local version = tvb(off, 1):uint()
    t:add(A.t_version, tvb(off, 1))
    if version ~= TRANSIT_VERSION then
        ctx:malformed(t, E.anode_malformed,
            fmt("transit header version %d not supported (this node speaks version %d)", version, TRANSIT_VERSION))
        return nil
    end
    if not ctx:need(t, off, 4, "transit header") then return nil end
    local flags = tvb(off + 1, 1):uint()
    local ft = t:add(A.t_flags, tvb(off + 1, 1))
    ft:add(A.t_flag_eval, tvb(off + 1, 1))
    ft:add(A.t_flag_ee_route, tvb(off + 1, 1))
    local hl = tvb(off + 2, 2):uint()
    local hli = t:add(A.t_hdr_len, tvb(off + 2, 2))
    if hl < TRANSIT_LEN then
        ctx:malformed(hli, E.anode_malformed,
            fmt("transit header length %d is shorter than the 72-byte version-1 header", hl))
        return nil
    end
    local ok = true
    if off + hl > ctx.pkt_end then
        ctx:malformed(hli, E.anode_malformed, fmt("transit header truncated: needs %d bytes, has %d",
            hl, ctx.pkt_end - off))
        ok = false
    end
    local tr = { flags = flags, next = off + hl }
    if off + TRANSIT_LEN > ctx.limit then
        -- Show what fits, then stop.
        if off + 6 <= ctx.limit then t:add(A.t_rb, tvb(off + 4, 2)) end
        if ok then ctx:need(t, off, TRANSIT_LEN, "transit header") end
        return nil
    end
    t:set_len(math.min(hl, ctx.limit - off))
    tr.rb = tvb(off + 4, 2):uint()
    tr.rb_range = tvb(off + 4, 2)
    t:add(A.t_rb, tvb(off + 4, 2))
    t:add(A.t_reserved, tvb(off + 6, 2))
    tr.flow = tvb(off + 8, 8):uint64()
    t:add(A.t_flow, tvb(off + 8, 8))
    tr.src, tr.src_item = add_node_addr(t, A.t_src, tvb, off + 16)
    tr.dst, tr.dst_item = add_node_addr(t, A.t_dst, tvb, off + 34)
    tr.prev_hop = add_node_addr(t, A.t_prev, tvb, off + 52)
    tr.src_range = tvb(off + 16, NODE_ADDR_LEN)
    tr.dst_range = tvb(off + 34, NODE_ADDR_LEN)
    t:add(A.t_pad, tvb(off + 70, 2))
    if hl > TRANSIT_LEN then
        local it = ctx:add_bytes(t, A.t_ext, off + TRANSIT_LEN, off + hl)
        if it then it:add_proto_expert_info(E.anode_ext) end
    end
    t:append_text(fmt(", %s → %s, RB %d", tr.src, tr.dst, tr.rb))
    if not ok then return nil end
    return tr
end

local function flow_text(flow)
    if flow == UInt64(0) then return "" end
    local h = flow:tohex():gsub("^0+", "")
    return " flow 0x" .. h
end

---------------------------------------------------------------------------------------------
-- Capsule header (after the transit header)

local function dissect_capsule(ctx, tree, off, tr)
    local tvb = ctx.tvb
    local c = tree:add(A.capsule, ctx:range(off, math.min(CAPSULE_LEN, ctx.limit - off)))
    if not ctx:need(c, off, 1, "capsule header") then return "Capsule (truncated)" end
    local version = tvb(off, 1):uint()
    c:add(A.c_version, tvb(off, 1))
    if version ~= CAPSULE_VERSION then
        ctx:malformed(c, E.anode_malformed,
            fmt("capsule header version %d not supported (this node speaks version %d)", version, CAPSULE_VERSION))
        return "Capsule (bad version)"
    end
    if not ctx:need(c, off, 4, "capsule header") then return "Capsule (truncated)" end
    c:add(A.c_flags, tvb(off + 1, 1))
    local hl = tvb(off + 2, 2):uint()
    local hli = c:add(A.c_hdr_len, tvb(off + 2, 2))
    if hl < CAPSULE_LEN then
        ctx:malformed(hli, E.anode_malformed,
            fmt("capsule header length %d is shorter than the 56-byte version-1 header", hl))
        return "Capsule (bad header length)"
    end
    local ok = true
    if off + hl > ctx.pkt_end then
        ctx:malformed(hli, E.anode_malformed, fmt("capsule header truncated: needs %d bytes, has %d",
            hl, ctx.pkt_end - off))
        ok = false
    end
    local info = "Capsule"
    if off + 36 <= ctx.limit then
        c:add(A.c_code, tvb(off + 4, 32))
        info = "Capsule code " .. short_hash(tvb, off + 4)
    end
    if off + CAPSULE_LEN > ctx.limit then
        if ok then ctx:need(c, off, CAPSULE_LEN, "capsule header") end
        return info
    end
    c:set_len(math.min(hl, ctx.limit - off))
    local _, si, unspecified = add_node_addr(c, A.c_source, tvb, off + 36)
    if unspecified then si:append_text(" (none: load the code from the previous hop)") end
    c:add(A.c_pad, tvb(off + 54, 2))
    if hl > CAPSULE_LEN then
        local it = ctx:add_bytes(c, A.c_ext, off + CAPSULE_LEN, off + hl)
        if it then it:add_proto_expert_info(E.anode_ext) end
    end
    c:append_text(", code " .. short_hash(tvb, off + 4))
    if ok then
        local p = off + hl
        local plen = ctx.pkt_end - p
        tree:add(A.c_payload_len, plen):set_generated()
        ctx:add_bytes(tree, A.c_payload, p, ctx.pkt_end)
    end
    if tr then
        info = fmt("%s %s → %s RB %d%s", info, tr.src, tr.dst, tr.rb, flow_text(tr.flow))
    end
    return info
end

---------------------------------------------------------------------------------------------
-- Datagram header (after the transit header)

local function dissect_datagram(ctx, tree, off, tr)
    local tvb = ctx.tvb
    local d = tree:add(A.datagram, ctx:range(off, math.min(DATAGRAM_LEN, ctx.limit - off)))
    if off + 2 <= ctx.limit then d:add(A.d_port, tvb(off, 2)) end
    if not ctx:need(d, off, DATAGRAM_LEN, "datagram header") then return "Datagram (truncated)" end
    local port = tvb(off, 2):uint()
    d:add(A.d_reserved, tvb(off + 2, 2))
    d:append_text(fmt(", port %d", port))
    local plen = ctx.pkt_end - off - DATAGRAM_LEN
    tree:add(A.d_payload_len, plen):set_generated()
    ctx:add_bytes(tree, A.d_payload, off + DATAGRAM_LEN, ctx.pkt_end)
    local info = fmt("Datagram port %d", port)
    if tr then info = fmt("%s %s → %s RB %d%s len %d", info, tr.src, tr.dst, tr.rb, flow_text(tr.flow), plen) end
    return info
end

---------------------------------------------------------------------------------------------
-- Deploy messages (crates/wire/src/deploy.rs), after the transit header

local function deploy_request(ctx, d, off)
    local tvb = ctx.tvb
    if not ctx:need(d, off, 222, "deploy request") then return "Deploy request (truncated)" end
    d:add(A.dp_op, tvb(off + 2, 1))
    d:add(A.dp_hop, tvb(off + 3, 1))
    d:add(A.dp_reply_port, tvb(off + 4, 2))
    local nl, vl = tvb(off + 6, 1):uint(), tvb(off + 7, 1):uint()
    d:add(A.dp_ttl, tvb(off + 8, 4))
    d:add(A.dp_pkg_len, tvb(off + 12, 4))
    d:add(A.dp_expires, tvb(off + 16, 8))
    d:add(A.dp_nonce, tvb(off + 24, 16))
    local origin = add_node_addr(d, A.dp_origin, tvb, off + 40)
    local target = add_node_addr(d, A.dp_target, tvb, off + 58)
    d:add(A.dp_pkg_hash, tvb(off + 76, 32))
    d:add(A.dp_signer, tvb(off + 108, 32))
    d:add(A.dp_signature, tvb(off + 140, 64))
    add_node_addr(d, A.dp_via, tvb, off + 204)
    local op = deploy_ops[tvb(off + 2, 1):uint()] or "?"
    if not ctx:need(d, off + 222, nl + vl, "deploy request strings") then return "Deploy request" end
    local name = tvb(off + 222, nl):string()
    d:add(A.dp_module, tvb(off + 222, nl))
    if vl > 0 then d:add(A.dp_module_version, tvb(off + 222 + nl, vl)) end
    local rat = off + 222 + nl + vl
    if tvb:len() >= rat + 2 then
        local rl = tvb(rat, 2):uint()
        if ctx:need(d, rat + 2, rl, "deploy request repository URL") then
            d:add(A.dp_repo, tvb(rat + 2, rl))
        end
    end
    local version = vl > 0 and (" " .. tvb(off + 222 + nl, vl):string()) or ""
    return fmt("Deploy %s %s%s %s → %s hop %d", op, name, version, origin, target, tvb(off + 3, 1):uint())
end

local function deploy_result(ctx, d, off)
    local tvb = ctx.tvb
    if not ctx:need(d, off, 52, "deploy result") then return "Deploy result (truncated)" end
    d:add(A.dp_outcome, tvb(off + 2, 1))
    d:add(A.dp_hop, tvb(off + 3, 1))
    d:add(A.dp_elapsed, tvb(off + 8, 4))
    d:add(A.dp_last, tvb(off + 12, 4))
    d:add(A.dp_nonce, tvb(off + 16, 16))
    local node = add_node_addr(d, A.dp_node, tvb, off + 32)
    local rl = tvb(off + 4, 2):uint()
    local reason = ""
    if rl > 0 and ctx:need(d, off + 52, rl, "deploy result reason") then
        d:add(A.dp_reason, tvb(off + 52, rl))
        reason = ": " .. tvb(off + 52, rl):string()
    end
    return fmt("Deploy result hop %d %s %s%s", tvb(off + 3, 1):uint(), node,
        deploy_outcomes[tvb(off + 2, 1):uint()] or "?", reason)
end

local function deploy_transfer(ctx, d, off)
    local tvb = ctx.tvb
    if not ctx:need(d, off, 64, "deploy transfer") then return "Deploy transfer (truncated)" end
    d:add(A.dp_nonce, tvb(off + 4, 16))
    local b = off + 20
    d:add(A.dp_transfer, tvb(b, 1))
    d:add(A.dp_pkg_hash, tvb(b + 4, 32))
    d:add(A.dp_offset, tvb(b + 36, 4))
    d:add(A.dp_count, tvb(b + 40, 4))
    local kind = transfer_kinds[tvb(b, 1):uint()] or "?"
    local dl = tvb(b + 2, 2):uint()
    if dl > 0 and ctx:need(d, b + 44, dl, "deploy chunk") then d:add(A.dp_data, tvb(b + 44, dl)) end
    return fmt("Deploy transfer %s %s offset %d", kind, short_hash(tvb, b + 4), tvb(b + 36, 4):uint())
end

local function dissect_deploy(ctx, tree, off)
    local tvb = ctx.tvb
    local d = tree:add(A.deploy, ctx:range(off, ctx.pkt_end - off))
    if not ctx:need(d, off, 2, "deploy message") then return "Deploy (truncated)" end
    d:add(A.dp_version, tvb(off, 1))
    d:add(A.dp_kind, tvb(off + 1, 1))
    local kind = tvb(off + 1, 1):uint()
    if tvb(off, 1):uint() ~= 1 then
        ctx:malformed(d, E.anode_malformed, fmt("deploy message version %d not supported", tvb(off, 1):uint()))
        return "Deploy (bad version)"
    elseif kind == 1 then
        return deploy_request(ctx, d, off)
    elseif kind == 2 then
        return deploy_result(ctx, d, off)
    elseif kind == 3 then
        return deploy_transfer(ctx, d, off)
    end
    ctx:malformed(d, E.anode_malformed, fmt("deploy message kind %d unknown", kind))
    return "Deploy (unknown kind)"
end

---------------------------------------------------------------------------------------------
-- PLAN chunk reader (crates/plan/src/marshal.rs)

local Reader = {}
Reader.__index = Reader

-- A reader over the captured bytes [start, stop) of tvb; offsets in messages are relative to
-- start (as in the Rust decoder's errors).
local function new_reader(tvb, start, stop)
    return setmetatable({ tvb = tvb, raw = tvb:raw(start, stop - start), base = start, pos = 0,
        stop = stop - start }, Reader)
end

function Reader:remaining() return self.stop - self.pos end

function Reader:take(n)
    if n > self:remaining() then
        return nil, fmt("truncated input: needed %d more bytes at offset %d", n - self:remaining(), self.pos)
    end
    local p = self.pos
    self.pos = p + n
    return p
end

function Reader:u8()
    local p, err = self:take(1)
    if not p then return nil, err end
    return self.raw:byte(p + 1)
end

-- A minimal LEB128 varint: returns a Lua number (exact below 2^53) and the exact UInt64.
function Reader:varint()
    local at = self.pos
    local v, big = 0, UInt64(0)
    for i = 0, 9 do
        local b, err = self:u8()
        if not b then return nil, err end
        local bits = band(b, 0x7f)
        if i == 9 and bits > 1 then return nil, fmt("malformed varint at offset %d", at) end
        v = v + bits * 2 ^ (7 * i)
        big = big + UInt64(bits):lshift(7 * i)
        if b < 0x80 then
            if i > 0 and b == 0 then return nil, fmt("malformed varint at offset %d", at) end
            return v, big
        end
    end
    return nil, fmt("malformed varint at offset %d", at)
end

function Reader:len(limit)
    local at = self.pos
    local n, big = self:varint()
    if not n then return nil, big end
    if n > limit or n > self:remaining() then
        return nil, fmt("length %s at offset %d exceeds the input or the limit", tostring(big), at)
    end
    return n
end

-- A length-prefixed UTF-8 string: returns its absolute tvb offset, length and text.
function Reader:string(limit, what)
    local at = self.pos
    local n, err = self:len(limit)
    if not n then return nil, err end
    local p = self:take(n)
    local s = self.raw:sub(p + 1, p + n)
    if not valid_utf8(s) then return nil, fmt("%s at offset %d is not valid UTF-8", what, at) end
    return self.base + p, n, s
end

function Reader:abs(p) return self.base + p end

local function quote(s)
    local body = s
    if #body > 40 then body = body:sub(1, 40) end
    body = body:gsub('["\\]', "\\%0"):gsub("[^\32-\126]", function(c)
        if c == "\n" then return "\\n" end
        return fmt("\\x%02x", c:byte())
    end)
    if #s > 40 then body = body .. "…" end
    return '"' .. body .. '"'
end

-- Values are read into nodes {at, len, text, depth, kind, n, kids} first (one pass), then
-- added to the tree, so that a list's item carries the list's text as its value.

local read_nested_chunk
local too_deep = fmt("value nested deeper than %d levels", MAX_VALUE_DEPTH)

local function join(texts, n)
    if n > 8 then texts[9] = "…" end
    return table.concat(texts, ", ")
end

-- Reads one value (crates/plan/src/marshal.rs read_value). Returns its node, or nil and an
-- error message.
local function read_value(r, depth)
    local at = r.pos
    local tag, err = r:u8()
    if not tag then return nil, err end
    local function node(text, d)
        return { at = r:abs(at), len = r.pos - at, text = text, depth = d or 0 }
    end
    if tag == 0 then
        return node("()")
    elseif tag == 1 then
        local z, zbig = r:varint()
        if not z then return nil, zbig end
        if z < 2 ^ 53 then
            if z % 2 == 0 then return node(fmt("%d", z / 2)) end
            return node(fmt("%d", -(z + 1) / 2))
        end
        local half = zbig:rshift(1)
        if zbig:lower() % 2 == 1 then return node("-" .. tostring(half + UInt64(1))) end
        return node(tostring(half))
    elseif tag == 2 then
        local c, e = r:u8()
        if not c then return nil, e end
        if c >= 32 and c < 127 and c ~= 39 and c ~= 92 then return node(fmt("'%c'", c)) end
        return node(fmt("'\\%03d'", c))
    elseif tag == 3 or tag == 7 or tag == 8 then
        local n, e = r:len(MAX_DECODE_LEN)
        if not n then return nil, e end
        local p = r:take(n)
        local s = r.raw:sub(p + 1, p + n)
        if tag == 3 then return node(quote(s)) end
        return node(fmt("%s (%d bytes) %s", tag == 7 and "key" or "blob", n, clip(hex(s), 32)))
    elseif tag == 4 then
        local b, e = r:u8()
        if not b then return nil, e end
        if b > 1 then return nil, fmt("invalid bool at offset %d", at) end
        return node(b == 1 and "true" or "false")
    elseif tag == 5 then
        local fam, e = r:u8()
        if not fam then return nil, e end
        local text
        if fam == 4 then
            local p, e2 = r:take(4)
            if not p then return nil, e2 end
            text = fmt("%d.%d.%d.%d", r.raw:byte(p + 1, p + 4))
        elseif fam == 6 then
            local p, e2 = r:take(16)
            if not p then return nil, e2 end
            text = "[" .. v6_string({ r.raw:byte(p + 1, p + 16) }, 1) .. "]"
        else
            return nil, fmt("invalid host address family at offset %d", at)
        end
        local p, e3 = r:take(2)
        if not p then return nil, e3 end
        local hi, lo = r.raw:byte(p + 1, p + 2)
        return node(fmt("%s:%d", text, hi * 256 + lo))
    elseif tag == 6 or tag == 10 then
        local v, e = r:varint()
        if not v then return nil, e end
        local what = tag == 6 and "port" or "dev"
        if v > 4294967295 then return nil, fmt("invalid %s at offset %d", what, at) end
        return node(fmt("%s %d", what, v))
    elseif tag == 9 then
        local p, n, s = r:string(255, "exception name")
        if not p then return nil, n end
        if not ident_ok(s, false) then return nil, fmt("invalid exception name at offset %d", at) end
        return node("exn " .. s)
    elseif tag == 11 or tag == 12 then
        if depth >= MAX_VALUE_DEPTH then return nil, too_deep end
        local n, e = r:len(math.huge)
        if not n then return nil, e end
        if tag == 12 and n < 2 then return nil, fmt("invalid tuple arity at offset %d", at) end
        local kids, texts, maxd = {}, {}, 0
        for i = 1, n do
            local kid, e2 = read_value(r, depth + 1)
            if not kid then return nil, e2 end
            kids[i] = kid
            if i <= 8 then texts[i] = kid.text end
            if kid.depth > maxd then maxd = kid.depth end
        end
        if maxd + 1 > MAX_VALUE_DEPTH then return nil, too_deep end
        local text = tag == 11 and "[" .. join(texts, n) .. "]" or "(" .. join(texts, n) .. ")"
        local nd = node(clip(text, 200), maxd + 1)
        nd.kind = tag == 11 and "list" or "tuple"
        nd.n = n
        nd.kids = kids
        return nd
    elseif tag == 13 then
        if depth >= MAX_VALUE_DEPTH then return nil, too_deep end
        local c, e = read_nested_chunk(r, depth + 1)
        if not c then return nil, e end
        c.at = r:abs(at)
        c.len = r.pos - at
        return c
    end
    return nil, fmt("unknown value tag %d at offset %d", tag, at)
end

-- The code part of a chunk: returns {kind, desc, text_at, text_len, text, len_at, len_len,
-- hash_at} or nil and an error message.
local function read_code(r)
    local at = r.pos
    local ck, err = r:u8()
    if not ck then return nil, err end
    local c = { kind = ck, at = r:abs(at) }
    if ck == 0 then
        c.desc = "no code"
    elseif ck == 1 then
        local lat = r.pos
        local p, n, s = r:string(MAX_DECODE_LEN, "code text")
        if not p then return nil, n end
        c.len_at, c.len_len, c.text_at, c.text_len, c.text = r:abs(lat), p - r:abs(lat), p, n, s
        c.desc = fmt("program text, %d bytes", n)
    elseif ck == 2 then
        local p, e = r:take(32)
        if not p then return nil, e end
        c.hash_at = r:abs(p)
        c.desc = "hash " .. hex(r.raw:sub(p + 1, p + 4)) .. "…"
    else
        return nil, fmt("invalid code tag at offset %d", at)
    end
    c.len = r:abs(r.pos) - c.at
    return c
end

local function read_func(r)
    local fat = r.pos
    local fp, fnl, func = r:string(255, "function name")
    if not fp then return nil, fnl end
    if not ident_ok(func, false) then return nil, fmt("invalid function name at offset %d", fat) end
    return { at = r:abs(fat), len = r.pos - fat, text = func }
end

read_nested_chunk = function(r, depth)
    local code, err = read_code(r)
    if not code then return nil, err end
    local func, e = read_func(r)
    if not func then return nil, e end
    local n, e2 = r:len(math.huge)
    if not n then return nil, e2 end
    local kids = {
        { at = code.at, len = code.len, text = "code: " .. code.desc, label = "Code: " .. code.desc },
        { at = func.at, len = func.len, text = "function: " .. func.text, label = "Function: " .. func.text },
    }
    local texts, maxd = {}, 0
    for i = 1, n do
        local kid, e3 = read_value(r, depth)
        if not kid then return nil, e3 end
        kids[#kids + 1] = kid
        if i <= 8 then texts[i] = kid.text end
        if kid.depth > maxd then maxd = kid.depth end
    end
    if 1 + maxd > MAX_VALUE_DEPTH then return nil, too_deep end
    return { text = clip(fmt("|%s|(%s)", func.text, join(texts, n)), 200), depth = 1 + maxd,
        kind = "chunk", n = n, kids = kids }
end

-- Adds a value node under tree as field f (its children as anode.plan.value).
local function add_value(ctx, tree, nd, f)
    local it = tree:add(f, ctx.tvb(nd.at, nd.len), printable(nd.text))
    if nd.label then it:set_text(nd.label) end
    if nd.kind == "chunk" then
        it:append_text(" (chunk)")
    elseif nd.kind then
        it:append_text(fmt(" (%s, %d %s)", nd.kind, nd.n, nd.n == 1 and "item" or "items"))
    end
    if nd.kids then
        for _, kid in ipairs(nd.kids) do add_value(ctx, it, kid, A.p_value) end
    end
end

-- Reads the packet's chunk (crates/plan/src/marshal.rs read_chunk, depth 0), adding its
-- fields to tree as they are read. Returns {text, code} or nil and an error message.
local function read_chunk(ctx, r, tree)
    local tvb = ctx.tvb
    local code, err = read_code(r)
    if not code then return nil, err end
    tree:add(A.p_code_kind, tvb(code.at, 1))
    if code.text then
        tree:add(A.p_code_len, tvb(code.len_at, code.len_len), code.text_len)
        if code.text_len > 0 then tree:add(A.p_code_text, tvb(code.text_at, code.text_len), code.text) end
    elseif code.hash_at then
        tree:add(A.p_code_hash, tvb(code.hash_at, 32))
    end
    local func, e = read_func(r)
    if not func then return nil, e end
    tree:add(A.p_entry, tvb(func.at, func.len), func.text)
    local cat = r.pos
    local n, e2 = r:len(math.huge)
    if not n then return nil, e2 end
    tree:add(A.p_argc, tvb(r:abs(cat), r.pos - cat), n)
    local texts, maxd = {}, 0
    for i = 1, n do
        local nd, e3 = read_value(r, 0)
        if not nd then return nil, e3 end
        add_value(ctx, tree, nd, A.p_arg)
        if i <= 8 then texts[i] = nd.text end
        if nd.depth > maxd then maxd = nd.depth end
    end
    if 1 + maxd > MAX_VALUE_DEPTH then return nil, too_deep end
    return { text = clip(fmt("|%s|(%s)", func.text, join(texts, n)), 200), code = code.desc }
end


---------------------------------------------------------------------------------------------
-- PLAN body (crates/plan/src/packet.rs), after the transit header

local function dissect_plan(ctx, tree, off, tr)
    local tvb = ctx.tvb
    local stop = ctx.pkt_end
    local p = tree:add(A.plan, ctx:range(off, ctx.limit - off))
    local info = "PLAN"
    if tr then
        p:add(A.p_source, tr.src_range, tr.src):set_generated()
        p:add(A.p_eval_dest, tr.dst_range, tr.dst):set_generated()
        p:add(A.p_rb, tr.rb_range, tr.rb):set_generated()
    end
    local function tail()
        if tr then return fmt(" %s → %s RB %d", tr.src, tr.dst, tr.rb) end
        return ""
    end
    if not ctx:need(p, off, 6, "PLAN body") then return info .. tail() end
    local magic = tvb(off, 1):uint()
    local mi = p:add(A.p_magic, tvb(off, 1))
    if magic ~= PLAN_MAGIC then
        ctx:malformed(mi, E.anode_malformed, fmt("not a PLAN body (magic byte 0x%02x, expected 0xa7)", magic))
        return info .. " (bad magic)" .. tail()
    end
    local version = tvb(off + 1, 1):uint()
    local vi = p:add(A.p_version, tvb(off + 1, 1))
    if version ~= PLAN_VERSION then
        ctx:malformed(vi, E.anode_malformed, fmt("unsupported PLAN body version %d", version))
        return info .. " (bad version)" .. tail()
    end
    p:add(A.p_session, tvb(off + 2, 4))
    local at = off + 6
    local names = {}
    for _, spec in ipairs({ { A.p_route_fun_len, A.p_route_fun, "routFun", false },
        { A.p_handler_len, A.p_handler, "handler", true } }) do
        if not ctx:need(p, at, 1, "PLAN " .. spec[3] .. " length") then return info .. tail() end
        local n = tvb(at, 1):uint()
        local li = p:add(spec[1], tvb(at, 1))
        if not ctx:need(li, at + 1, n, "PLAN " .. spec[3]) then return info .. tail() end
        local s = tvb:raw(at + 1, n)
        local ni = p:add(spec[2], n > 0 and tvb(at + 1, n) or tvb(at, 1), printable(s))
        if n == 0 then ni:append_text("(none)") end
        if not ident_ok(s, spec[4]) then
            ctx:malformed(ni, E.anode_malformed, fmt("%s is not a valid PLAN identifier", spec[3]))
            return info .. tail()
        end
        names[spec[3]] = s
        at = at + 1 + n
    end
    p:append_text(", routFun " .. names.routFun)
    if not ctx:need(p, at, 4, "PLAN chunk length") then return info .. tail() end
    local clen = tvb(at, 4):uint()
    local cli = p:add(A.p_chunk_len, tvb(at, 4))
    at = at + 4
    if at + clen > stop then
        ctx:malformed(cli, E.anode_malformed,
            fmt("PLAN body truncated: the chunk needs %d bytes, has %d", clen, stop - at))
        return info .. tail() .. " " .. names.routFun
    end
    if at + clen < stop then
        local ti = ctx:add_bytes(p, A.p_trailing, at + clen, stop)
        ctx:malformed(ti or p, E.anode_malformed, fmt("%d bytes after the chunk", stop - at - clen))
    end
    if at + clen > ctx.limit then
        ctx:need(p, at, clen, "PLAN chunk")
        return info .. tail() .. " " .. names.routFun
    end
    local ci = p:add(A.p_chunk, clen > 0 and tvb(at, clen) or tvb(at - 4, 4))
    local r = new_reader(tvb, at, at + clen)
    local c, err = read_chunk(ctx, r, ci)
    if not c then
        ctx:malformed(ci, E.anode_malformed, "bad chunk: " .. err)
        return info .. " (bad chunk)" .. tail() .. " " .. names.routFun
    end
    if r:remaining() > 0 then
        ctx:malformed(ci, E.anode_malformed, fmt("bad chunk: %d trailing bytes after the encoded item", r:remaining()))
    end
    ci:append_text(": " .. c.text .. " (" .. c.code .. ")")
    return fmt("PLAN %s%s %s", clip(c.text:sub(2):gsub("|", "", 1), 80), tail(), names.routFun)
end

---------------------------------------------------------------------------------------------
-- Control messages (crates/wire/src/control.rs)

local function dissect_control(ctx, tree, off)
    local tvb = ctx.tvb
    local k = tree:add(A.control, ctx:range(off, ctx.limit - off))
    if not ctx:need(k, off, 1, "control header") then return "Control (truncated)" end
    local kind = tvb(off, 1):uint()
    local ki = k:add(A.k_kind, tvb(off, 1))
    local kname = control_kinds[kind] or fmt("kind %d", kind)
    k:append_text(": " .. kname)
    if not ctx:need(k, off + 1, 1, "control header") then return "Control " .. kname .. " (truncated)" end
    local version = tvb(off + 1, 1):uint()
    local vi = k:add(A.k_version, tvb(off + 1, 1))
    if version ~= CONTROL_VERSION then
        ctx:malformed(vi, E.anode_malformed,
            fmt("control message version %d not supported (this node speaks version %d)", version, CONTROL_VERSION))
        return "Control " .. kname .. " (bad version)"
    end
    if not ctx:need(k, off, 4, "control header") then return "Control " .. kname .. " (truncated)" end
    local len = tvb(off + 2, 2):uint()
    local li = k:add(A.k_len, tvb(off + 2, 2))
    local b = off + 4 -- body start
    local bend = b + len
    if bend > ctx.pkt_end then
        ctx:malformed(li, E.anode_malformed, fmt("control body truncated: needs %d bytes, has %d",
            len, ctx.pkt_end - b))
        return "Control " .. kname .. " (truncated)"
    end
    if bend < ctx.pkt_end then ctx:add_bytes(k, A.k_trailing, bend, ctx.pkt_end) end
    if not control_kinds[kind] then
        ctx:malformed(ki, E.anode_malformed, fmt("unknown control message kind %d", kind))
        return "Control " .. kname .. " (unknown)"
    end
    -- Body fields are read inside [b, bend): a field past bend is a truncated body.
    local saved_end = ctx.pkt_end
    ctx.pkt_end = bend
    local saved_limit = ctx.limit
    ctx.limit = math.min(ctx.limit, bend)
    local used = 0
    local info
    local function need(off2, n, what) return ctx:need(k, off2, n, what) end
    local function finish(text)
        ctx.pkt_end, ctx.limit = saved_end, saved_limit
        return text
    end
    local name = "Control " .. kname
    if kind == K_HELLO then
        if not need(b, NODE_ADDR_LEN, "hello") then return finish(name .. " (truncated)") end
        local sender = add_node_addr(k, A.h_sender, tvb, b)
        info = name .. " " .. sender
        if not need(b, 24, "hello") then return finish(info .. " (truncated)") end
        k:add(A.k_pad, tvb(b + 18, 2))
        local hello_ms = tvb(b + 20, 4):uint()
        k:add(A.h_interval, tvb(b + 20, 4))
        if not need(b, 28, "hello") then return finish(info .. " (truncated)") end
        local dead_ms = tvb(b + 24, 4):uint()
        k:add(A.h_dead, tvb(b + 24, 4))
        if not need(b, 32, "hello") then return finish(info .. " (truncated)") end
        local seq = tvb(b + 28, 4):uint()
        k:add(A.h_seq, tvb(b + 28, 4))
        if not need(b, 34, "hello") then return finish(info .. " (truncated)") end
        local n = tvb(b + 32, 2):uint()
        local ni = k:add(A.h_count, tvb(b + 32, 2))
        used = 34
        if b + 36 <= ctx.limit then
            k:add(A.k_pad, tvb(b + 34, 2))
            used = 36
        end
        info = fmt("%s seq %d seen %d (hello %d ms, dead %d ms)", info, seq, n, hello_ms, dead_ms)
        if n > MAX_SEEN then
            ctx:malformed(ni, E.anode_malformed, "hello neighbor count: more than 64 neighbors")
            return finish(info)
        end
        for i = 0, n - 1 do
            local at = b + 36 + i * NODE_ADDR_LEN
            if not need(at, NODE_ADDR_LEN, "node address") then return finish(info) end
            add_node_addr(k, A.h_seen, tvb, at)
            used = 36 + (i + 1) * NODE_ADDR_LEN
        end
    elseif kind == K_ROUTES then
        if not need(b, NODE_ADDR_LEN, "routes") then return finish(name .. " (truncated)") end
        local sender = add_node_addr(k, A.r_sender, tvb, b)
        info = name .. " " .. sender
        if not need(b, 24, "routes") then return finish(info .. " (truncated)") end
        local seq = tvb(b + 18, 2):uint()
        k:add(A.r_seq, tvb(b + 18, 2))
        local n = tvb(b + 20, 2):uint()
        local ni = k:add(A.r_count, tvb(b + 20, 2))
        local flags = tvb(b + 22, 2):uint()
        local fi = k:add(A.r_flags, tvb(b + 22, 2))
        fi:add(A.r_full_first, tvb(b + 22, 2))
        fi:add(A.r_full_last, tvb(b + 22, 2))
        fi:add(A.r_digest, tvb(b + 22, 2))
        fi:add(A.r_request, tvb(b + 22, 2))
        used = 24
        local what = {}
        if band(flags, 4) ~= 0 then what[#what + 1] = "digest" end
        if band(flags, 8) ~= 0 then what[#what + 1] = "request" end
        if band(flags, 3) == 3 then what[#what + 1] = "full table"
        elseif band(flags, 1) ~= 0 then what[#what + 1] = "full table first"
        elseif band(flags, 2) ~= 0 then what[#what + 1] = "full table last" end
        local tag = #what > 0 and (" [" .. table.concat(what, ", ") .. "]") or ""
        info = fmt("%s seq %d%s: %d %s", info, seq, tag, n, n == 1 and "entry" or "entries")
        if n > MAX_ROUTES then
            ctx:malformed(ni, E.anode_malformed, "routes entry count: more than 64 entries")
            return finish(info)
        end
        local inf = anode.prefs.infinity
        for i = 0, n - 1 do
            local at = b + 24 + i * 20
            if not need(at, NODE_ADDR_LEN, "node address") then return finish(info) end
            local e = k:add(A.r_entry, ctx:range(at, math.min(20, ctx.limit - at)))
            local dest = add_node_addr(e, A.r_dest, tvb, at)
            if not need(at + 18, 2, "route entry") then return finish(info) end
            local metric = tvb(at + 18, 2):uint()
            local mi = e:add(A.r_metric, tvb(at + 18, 2))
            local unreachable = metric >= inf and " (unreachable)" or ""
            mi:append_text(unreachable)
            e:set_text(fmt("Route: %s metric %d%s", dest, metric, unreachable))
            used = 24 + (i + 1) * 20
        end
    elseif kind == K_CODE_REQUEST or kind == K_CODE_CHUNK or kind == K_CODE_UNAVAILABLE then
        local what = ({ [K_CODE_REQUEST] = "code request", [K_CODE_CHUNK] = "code chunk",
            [K_CODE_UNAVAILABLE] = "code hash" })[kind]
        if not need(b, 32, "code hash") then return finish(name .. " (truncated)") end
        k:add(A.code_hash, tvb(b, 32))
        info = name .. " " .. short_hash(tvb, b)
        used = 32
        if kind == K_CODE_REQUEST then
            if not need(b, 36, what) then return finish(info .. " (truncated)") end
            local offset = tvb(b + 32, 4):uint()
            k:add(A.code_offset, tvb(b + 32, 4))
            if not need(b, 40, what) then return finish(info .. " (truncated)") end
            local max = tvb(b + 36, 4):uint()
            k:add(A.code_max, tvb(b + 36, 4))
            info = fmt("%s offset %d max %d", info, offset, max)
            used = 40
        elseif kind == K_CODE_CHUNK then
            if not need(b, 36, what) then return finish(info .. " (truncated)") end
            local total = tvb(b + 32, 4):uint()
            k:add(A.code_total, tvb(b + 32, 4))
            if not need(b, 40, what) then return finish(info .. " (truncated)") end
            local offset = tvb(b + 36, 4):uint()
            k:add(A.code_offset, tvb(b + 36, 4))
            if not need(b, 42, what) then return finish(info .. " (truncated)") end
            local dl = tvb(b + 40, 2):uint()
            local dli = k:add(A.code_len, tvb(b + 40, 2))
            info = fmt("%s bytes %d-%d of %d", info, offset, offset + dl, total)
            if b + 44 <= ctx.limit then k:add(A.k_pad, tvb(b + 42, 2)) end
            if not need(b + 44, dl, "code chunk data") then return finish(info .. " (truncated)") end
            if dl > 0 then k:add(A.code_data, tvb(b + 44, dl)) end
            used = 44 + dl
            if offset + dl > total then
                ctx:malformed(dli, E.anode_malformed, "code chunk: chunk extends past the object's total size")
            end
        end
    elseif kind == K_EE then
        if not need(b, 2, "ee control") then return finish(name .. " (truncated)") end
        local ty = tvb(b, 2):uint()
        k:add(A.ee_type, tvb(b, 2))
        if not need(b, 4, "ee control") then return finish(name .. " (truncated)") end
        k:add(A.k_pad, tvb(b + 2, 2))
        if len > 4 then ctx:add_bytes(k, A.ee_data, b + 4, bend) end
        used = len
        info = fmt("%s type 0x%04X (%s) %d bytes", name, ty, type_names[ty] or "unknown", len - 4)
    end
    if used < len then
        local it = ctx:add_bytes(k, A.k_extra, b + used, bend)
        if it then it:add_proto_expert_info(E.anode_ext) end
    end
    return finish(info)
end

---------------------------------------------------------------------------------------------
-- ANEP

local type_table = DissectorTable.new("anep.type", "ANEP Type ID", ftypes.UINT16, base.HEX, anep)

-- ANEP options [8, hl): returns false if the walk failed (malformed).
local function dissect_options(ctx, t, hl)
    local tvb = ctx.tvb
    local at = BASIC_HEADER_LEN
    local checksum_at
    while at < hl do
        if at >= ctx.limit then
            ctx:need(t, at, hl - at, "ANEP options", E.anep_malformed)
            return true, checksum_at
        end
        local o = t:add(F.option, tvb(at, math.min(4, ctx.limit - at)))
        if at + 4 > hl or at + 4 > ctx.limit then
            if at + 2 <= ctx.limit then o:add(F.opt_type, tvb(at, 2)) end
            if at + 4 > hl then
                ctx:malformed(o, E.anep_malformed, "ANEP option header truncated: runs past the header length")
            else
                ctx:need(o, at, 4, "ANEP option header", E.anep_malformed)
            end
            return false
        end
        local kind = tvb(at, 2):uint()
        local words = tvb(at + 2, 2):uint()
        local len = words * 4
        o:add(F.opt_type, tvb(at, 2))
        local li = o:add(F.opt_len, tvb(at + 2, 2))
        local oname = option_names[kind] or fmt("Unknown option %d", kind)
        o:set_text("Option: " .. oname)
        if len < 4 then
            ctx:malformed(li, E.anep_malformed, "ANEP option has an invalid length field: option length below one word")
            return false
        end
        if at + len > hl then
            ctx:malformed(li, E.anep_malformed, fmt("ANEP option value truncated: the %d-byte option runs past the %d-byte header",
                len, hl))
            return false
        end
        if at + len > ctx.limit then
            ctx:need(o, at, len, "ANEP option", E.anep_malformed)
            return true, checksum_at
        end
        o:set_len(len)
        local v = at + 4
        local vlen = len - 4
        local used = 0
        if kind == OPT_SOURCE or kind == OPT_DEST then
            if vlen < 4 then
                ctx:malformed(o, E.anep_malformed, "ANEP identifier option truncated")
                return false
            end
            local aty = tvb(v, 2):uint()
            local ati = o:add(F.opt_addr_type, tvb(v, 2))
            o:add(F.opt_port, tvb(v + 2, 2))
            local port = tvb(v + 2, 2):uint()
            local text
            if aty == 1 then
                if vlen < 8 then
                    ctx:malformed(o, E.anep_malformed, "ANEP IPv4 identifier truncated")
                    return false
                end
                o:add(F.opt_ip, tvb(v + 4, 4))
                text = fmt("%s:%d", fmt("%d.%d.%d.%d", tvb:raw(v + 4, 4):byte(1, 4)), port)
                used = 8
            elseif aty == 2 then
                if vlen < 20 then
                    ctx:malformed(o, E.anep_malformed, "ANEP IPv6 identifier truncated")
                    return false
                end
                o:add(F.opt_ipv6, tvb(v + 4, 16))
                text = "[" .. v6_string({ tvb:raw(v + 4, 16):byte(1, 16) }, 1) .. "]:" .. port
                used = 20
            else
                ctx:malformed(ati, E.anep_malformed, fmt("unknown address type %d in identifier option", aty))
                return false
            end
            o:add(kind == OPT_SOURCE and F.opt_source or F.opt_dest, tvb(v, used), text):set_generated()
            o:append_text(" " .. text)
            if kind == OPT_SOURCE then ctx.opt_source = text else ctx.opt_dest = text end
        elseif kind == OPT_CHECKSUM then
            if vlen < 2 then
                ctx:malformed(o, E.anep_malformed, "ANEP checksum option truncated")
                return false
            end
            o:add(F.opt_checksum, tvb(v, 2))
            used = 2
            if vlen >= 4 then
                o:add(F.opt_checksum_zero, tvb(v + 2, 2))
                used = 4
            end
            checksum_at = checksum_at or { off = v, item = o }
        elseif kind == OPT_AUTH then
            if vlen < 4 then
                ctx:malformed(o, E.anep_malformed, "ANEP authentication option truncated")
                return false
            end
            o:add(F.opt_auth_scheme, tvb(v, 2))
            local dl = tvb(v + 2, 2):uint()
            local dli = o:add(F.opt_auth_len, tvb(v + 2, 2))
            if 4 + dl > vlen then
                ctx:malformed(dli, E.anep_malformed, "ANEP authentication data truncated")
                return false
            end
            if dl > 0 then o:add(F.opt_auth_data, tvb(v + 4, dl)) end
            o:append_text(fmt(" scheme %d, %d bytes", tvb(v, 2):uint(), dl))
            used = 4 + dl
        else
            if vlen > 0 then o:add(F.opt_value, tvb(v, vlen)) end
            o:add_proto_expert_info(E.anep_unknown_option)
            used = vlen
        end
        if used < vlen then o:add(F.opt_pad, tvb(v + used, vlen - used)) end
        at = at + len
    end
    return true, checksum_at
end

local function dissect_anep(tvb, pinfo, root)
    local cap = tvb:len()
    local rep = tvb:reported_len()
    pinfo.cols.protocol:set("ANEP")
    local ctx = new_ctx(tvb, pinfo, root)
    local t = root:add(anep, ctx:range(0, math.min(cap, BASIC_HEADER_LEN)))
    ctx.limit = cap
    ctx.pkt_end = rep
    ctx.snapped = cap < rep
    local function done(info)
        pinfo.cols.info:set(info)
        return cap
    end
    -- Basic header fields, as far as they are there.
    if cap >= 1 then t:add(F.version, tvb(0, 1)) end
    if cap >= 2 then
        local fi = t:add(F.flags, tvb(1, 1))
        fi:add(F.flag_discard, tvb(1, 1))
    end
    if cap >= 4 then t:add(F.type, tvb(2, 2)) end
    if cap >= 6 then t:add(F.hdr_len, tvb(4, 2)):append_text(fmt(" (%d bytes)", tvb(4, 2):uint() * 4)) end
    if cap >= 8 then t:add(F.pkt_len, tvb(6, 2)) end
    if cap < BASIC_HEADER_LEN then
        if rep >= BASIC_HEADER_LEN then
            ctx:need(t, 0, BASIC_HEADER_LEN, "ANEP basic header", E.anep_malformed)
        else
            ctx:malformed(t, E.anep_malformed,
                fmt("ANEP basic header truncated: needs %d bytes, has %d", BASIC_HEADER_LEN, rep))
        end
        return done("ANEP (truncated basic header)")
    end
    local version = tvb(0, 1):uint()
    local type_id = tvb(2, 2):uint()
    local hl = tvb(4, 2):uint() * 4
    local plen = tvb(6, 2):uint()
    local tname = type_names[type_id] or fmt("Type 0x%04X", type_id)
    t:append_text(fmt(", %s, %d bytes", tname, plen))
    if version ~= ANEP_VERSION then
        ctx:malformed(t, E.anep_malformed,
            fmt("ANEP version %d not supported (this node speaks version %d)", version, ANEP_VERSION))
        return done(fmt("ANEP version %d (unsupported)", version))
    end
    if hl < BASIC_HEADER_LEN then
        ctx:malformed(t, E.anep_malformed,
            "ANEP header length has an invalid length field: shorter than the 8-byte basic header")
        return done("ANEP " .. tname .. " (bad header length)")
    end
    if plen < hl then
        ctx:malformed(t, E.anep_malformed,
            "ANEP packet length has an invalid length field: shorter than the header length")
        return done("ANEP " .. tname .. " (bad packet length)")
    end
    local truncated = false
    if plen > rep then
        ctx:malformed(t, E.anep_malformed, fmt("ANEP packet truncated: needs %d bytes, has %d", plen, rep))
        truncated = true
        ctx.pkt_end = rep
    else
        ctx.pkt_end = plen
    end
    ctx.limit = math.min(cap, ctx.pkt_end)
    ctx.snapped = cap < ctx.pkt_end
    t:set_len(ctx.limit)

    local ok, checksum_at = dissect_options(ctx, t, hl)
    if checksum_at and anep.prefs.verify_checksum then
        if not ctx.snapped and not truncated then
            local raw = tvb:raw(0, plen)
            local stored = tvb(checksum_at.off, 2):uint()
            local good = inet_sum(raw) == 0xffff
            local zeroed = raw:sub(1, checksum_at.off) .. "\0\0" .. raw:sub(checksum_at.off + 3)
            local expected = 0xffff - inet_sum(zeroed)
            local si = checksum_at.item:add(F.opt_checksum_status, tvb(checksum_at.off, 2),
                good and "Good" or "Bad")
            si:set_generated()
            if not good then
                ctx:malformed(si, E.anep_bad_checksum,
                    fmt("Bad ANEP integrity checksum 0x%04x (expected 0x%04x)", stored, expected))
            end
        end
    end

    local info
    if hl > ctx.pkt_end then
        info = "ANEP " .. tname .. " (truncated header)"
    elseif type_id == TYPE_CONTROL then
        local a = root:add(anode, ctx:range(hl, ctx.limit - hl))
        a:append_text(", Control")
        info = dissect_control(ctx, a, hl)
    elseif type_id == TYPE_DATAGRAM or type_id == TYPE_CAPSULE or type_id == TYPE_PLAN
        or type_id == TYPE_DEPLOY then
        local a = root:add(anode, ctx:range(hl, ctx.limit - hl))
        a:append_text(", " .. tname)
        local tr = dissect_transit(ctx, a, hl)
        if not tr then
            info = "ANEP " .. tname .. " (bad transit header)"
        else
            a:append_text(fmt(", %s → %s, RB %d", tr.src, tr.dst, tr.rb))
            if type_id == TYPE_CAPSULE then
                info = dissect_capsule(ctx, a, tr.next, tr)
            elseif type_id == TYPE_DATAGRAM then
                info = dissect_datagram(ctx, a, tr.next, tr)
            elseif type_id == TYPE_DEPLOY then
                info = dissect_deploy(ctx, a, tr.next)
            else
                info = dissect_plan(ctx, a, tr.next, tr)
            end
        end
    else
        local handled = false
        local d = type_table:get_dissector(type_id)
        if d and hl < ctx.limit then
            d:call(tvb(hl, ctx.limit - hl):tvb(), pinfo, root)
            handled = true
        end
        if not handled then
            local pi = ctx:add_bytes(t, F.payload, hl, ctx.pkt_end)
            t:add_proto_expert_info(E.anep_unknown_type, fmt("Type ID 0x%04X is not an anode execution environment (%s)",
                type_id, band(tvb(1, 1):uint(), FLAG_DISCARD_UNKNOWN) ~= 0 and "discard" or "forward"))
            if pi then pi:set_text(fmt("Payload (%d bytes)", ctx.pkt_end - hl)) end
        end
        info = fmt("ANEP Type 0x%04X, %d bytes", type_id, plen)
    end
    if not ok then info = info .. " [bad options]" end
    if rep > plen and cap > plen then
        local ti = t:add(F.trailer, tvb(plen, cap - plen))
        ti:add_proto_expert_info(E.anep_trailer)
    end
    if ctx.opt_dest and type_id == TYPE_CONTROL then info = info .. " dest " .. ctx.opt_dest end
    return done(info)
end

function anep.dissector(tvb, pinfo, tree)
    return dissect_anep(tvb, pinfo, tree)
end

---------------------------------------------------------------------------------------------
-- Registration: UDP ports (preference), Decode As, heuristic on any UDP port

local udp_table = DissectorTable.get("udp.port")
local registered_ports = ""

local function register_ports()
    local want = tostring(anep.prefs.ports)
    if want == registered_ports then return end
    if registered_ports ~= "" then udp_table:remove(registered_ports, anep) end
    if want ~= "" then udp_table:add(want, anep) end
    registered_ports = want
end

function anep.prefs_changed()
    register_ports()
end

register_ports()
udp_table:add_for_decode_as(anep)

-- Recognizes an ANEP header of version 1 with a known Type ID whose lengths fit the datagram,
-- and the version byte of the header that must follow it.
local function heuristic(tvb, pinfo, tree)
    if not anep.prefs.heuristic then return false end
    local cap = tvb:len()
    if cap < BASIC_HEADER_LEN then return false end
    if tvb(0, 1):uint() ~= ANEP_VERSION then return false end
    local type_id = tvb(2, 2):uint()
    if not type_names[type_id] then return false end
    local hl = tvb(4, 2):uint() * 4
    local plen = tvb(6, 2):uint()
    if hl < BASIC_HEADER_LEN or plen < hl or plen > tvb:reported_len() then return false end
    if plen < hl + 4 then return false end
    if hl + 2 <= cap then
        if type_id == TYPE_CONTROL then
            local kind = tvb(hl, 1):uint()
            if not control_kinds[kind] or tvb(hl + 1, 1):uint() ~= CONTROL_VERSION then return false end
        elseif tvb(hl, 1):uint() ~= TRANSIT_VERSION then
            return false
        end
    end
    dissect_anep(tvb, pinfo, tree)
    return true
end

anep:register_heuristic("udp", heuristic)

