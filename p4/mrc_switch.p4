/*
 * mrc_switch.p4 -- MRC fabric switch (P4_16, v1model).
 *
 * `make p4` compiles it with p4c into p4/mrc_switch.json (BMv2) and p4/mrc_switch.p4info.txtpb;
 * common/p4schema/mrc_switch.py describes the same names, ids and widths (checked against
 * that P4Info). The embedded target (switch/pipeline) executes this program; docs/switch.md
 * lists where it deviates from BMv2.
 *
 * Ingress: parser error / length checks, SRv6 uSID shift-and-forward (my_usid), IPv6 LPM to a
 * next hop, an ECMP group (action selector, crc16 over addresses, flow label, next header and
 * UDP ports) or a Structured-EV group (uplink named by (EV >> shift) & mask, where EV =
 * flow_label[15:0] ++ udp.src_port), DSCP -> class + priority, port_down register.
 * Egress: trimming of TRIMMABLE packets over the trim threshold (cut to the header stack,
 * lengths fixed, DSCP rewritten, high priority), ECN CE over the ECN threshold except on
 * last-hop ports, per port/class/queue counters, max queue depth register. Both thresholds
 * are in BYTES queued at enqueue (meta.enq_qdepth_bytes, see below); 0 disables.
 *
 * Build switches:
 *   MRC_EMBEDDED_TARGET  defined by the embedded target (switch/pipeline), which fills
 *                        meta.enq_qdepth_bytes as target intrinsic metadata with the real byte
 *                        depth of the (egress port, priority) queue.
 *   (not defined)        BMv2 / any v1model target: v1model has no byte depth, so egress
 *                        approximates it as enq_qdepth * BMV2_QDEPTH_CELL_BYTES.
 */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_IPV6 = 0x86DD;
const bit<8>  PROTO_UDP = 17;
const bit<8>  PROTO_IPV6 = 41;
const bit<8>  PROTO_ROUTING = 43;
const bit<16> ROCEV2_PORT = 4791;
const bit<9>  DROP_PORT = 511;
#ifndef MRC_EMBEDDED_TARGET
/* Bytes one queued packet counts for when only the packet depth is known (BMv2): the default
   fabric MTU, so a byte threshold T fires at ceil(T / 4096) queued packets
   (common/p4schema/mrc_switch.py BMV2_QDEPTH_CELL_BYTES). */
const bit<32> BMV2_QDEPTH_CELL_BYTES = 4096;
#endif
#define MAX_SEGMENTS 4

/* DropReason (common/p4schema/mrc_switch.py) */
const bit<32> DR_PARSE_ERROR = 1;
const bit<32> DR_BAD_LENGTH = 2;
const bit<32> DR_NOT_IPV6 = 3;
const bit<32> DR_HOP_LIMIT = 4;
const bit<32> DR_NO_ROUTE = 5;
const bit<32> DR_EV_MISS = 6;
const bit<32> DR_PORT_DOWN = 7;
const bit<32> DR_USID_ERROR = 9;

header ethernet_t { bit<48> dst_addr; bit<48> src_addr; bit<16> ether_type; }

header ipv6_t {
    bit<4>   version;
    bit<6>   dscp;
    bit<2>   ecn;
    bit<20>  flow_label;
    bit<16>  payload_len;
    bit<8>   next_hdr;
    bit<8>   hop_limit;
    bit<128> src_addr;
    bit<128> dst_addr;
}

header srh_t {
    bit<8>  next_hdr;
    bit<8>  hdr_ext_len;
    bit<8>  routing_type;
    bit<8>  segments_left;
    bit<8>  last_entry;
    bit<8>  flags;
    bit<16> tag;
}

header segment_t { bit<128> sid; }

header udp_t { bit<16> src_port; bit<16> dst_port; bit<16> length; bit<16> checksum; }

header bth_t {
    bit<8>  opcode;
    bit<8>  flags;
    bit<16> pkey;
    bit<8>  becn_fecn;
    bit<24> dest_qp;
    bit<1>  ack_req;
    bit<1>  rsvd0;
    bit<1>  rtx;
    bit<1>  tsh;
    bit<4>  rsvd1;
    bit<24> psn;
}

header meth_t  { bit<32> data; }
header tseth_t { bit<32> data; }
header reth_t  { bit<128> data; }
header immdt_t { bit<32> data; }

struct headers_t {
    ethernet_t ethernet;
    ipv6_t     ipv6;           /* outer IPv6 (the only one outside SRv6 mode) */
    srh_t      srh;
    segment_t[MAX_SEGMENTS] segments;
    ipv6_t     inner_ipv6;     /* SRv6 mode: the NIC-addressed IPv6 header */
    udp_t      udp;
    bth_t      bth;
    meth_t     meth;
    tseth_t    tseth;
    reth_t     reth;
    immdt_t    immdt;
}

struct metadata_t {
    bit<16> l4_sport;
    bit<16> l4_dport;
    bit<6>  dscp;
    bit<16> next_group;
    bit<32> ev;
    bit<16> ev_group;
    bit<16> ev_field;
    bit<16> ev_fallback;
    bit<3>  class_id;
    bit<1>  trimmable;
    bit<1>  routed;
    bit<1>  down;
    bit<1>  decap;
    bit<16> hdr_bytes;       /* bytes of the header stack (trim length) */
    bit<16> l4_offset;       /* bytes from the start of the frame to the UDP header */
    bit<16> srh_bytes;       /* SRH length, 0 without one */
    bit<32> ecn_threshold_bytes;
    bit<32> trim_threshold_bytes;
    bit<1>  last_hop;
    bit<6>  trim_dscp;
    bit<3>  trim_priority;
    /* Bytes queued in the (egress port, priority) queue when this packet is enqueued, the
       byte counterpart of standard_metadata.enq_qdepth. Target intrinsic metadata: the
       embedded target (MRC_EMBEDDED_TARGET) fills it before egress; otherwise egress
       approximates it from enq_qdepth. */
    bit<32> enq_qdepth_bytes;
}

parser MrcParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.ethernet);
        meta.hdr_bytes = 14;
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }
    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        verify(hdr.ipv6.version == 6, error.HeaderTooShort);
        meta.hdr_bytes = meta.hdr_bytes + 40;
        transition select(hdr.ipv6.next_hdr) {
            PROTO_ROUTING: parse_srh;
            PROTO_IPV6: parse_inner_ipv6;
            PROTO_UDP: parse_udp;
            default: accept;
        }
    }
    state parse_srh {
        pkt.extract(hdr.srh);
        /* at most MAX_SEGMENTS segments, and the length must agree with last_entry */
        verify(hdr.srh.last_entry < MAX_SEGMENTS, error.StackOutOfBounds);
        verify(hdr.srh.hdr_ext_len == (hdr.srh.last_entry + 1) * 2, error.HeaderTooShort);
        meta.srh_bytes = ((bit<16>)hdr.srh.hdr_ext_len << 3) + 8;
        meta.hdr_bytes = meta.hdr_bytes + 8;
        transition parse_segment;
    }
    state parse_segment {
        pkt.extract(hdr.segments.next);
        meta.hdr_bytes = meta.hdr_bytes + 16;
        transition select(hdr.segments.lastIndex == (bit<32>)hdr.srh.last_entry) {
            true: after_srh;
            false: parse_segment;
        }
    }
    state after_srh {
        transition select(hdr.srh.next_hdr) {
            PROTO_IPV6: parse_inner_ipv6;
            PROTO_UDP: parse_udp;
            default: accept;
        }
    }
    state parse_inner_ipv6 {
        pkt.extract(hdr.inner_ipv6);
        verify(hdr.inner_ipv6.version == 6, error.HeaderTooShort);
        meta.hdr_bytes = meta.hdr_bytes + 40;
        transition select(hdr.inner_ipv6.next_hdr) {
            PROTO_UDP: parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        meta.l4_offset = meta.hdr_bytes;
        meta.hdr_bytes = meta.hdr_bytes + 8;
        meta.l4_sport = hdr.udp.src_port;
        meta.l4_dport = hdr.udp.dst_port;
        transition select(hdr.udp.dst_port) {
            ROCEV2_PORT: parse_bth;
            default: accept;
        }
    }
    state parse_bth {
        pkt.extract(hdr.bth);
        meta.hdr_bytes = meta.hdr_bytes + 12;
        transition select(hdr.bth.opcode) {
            0xC6 &&& 0xFE: parse_meth;   /* Write First / Middle */
            0xC8 &&& 0xFC: parse_meth;   /* Write Last .. Write Only with Immediate */
            default: accept;
        }
    }
    state parse_meth {
        pkt.extract(hdr.meth);
        meta.hdr_bytes = meta.hdr_bytes + 4;
        transition select(hdr.bth.tsh) {
            1: parse_tseth;
            default: parse_reth;
        }
    }
    state parse_tseth {
        pkt.extract(hdr.tseth);
        meta.hdr_bytes = meta.hdr_bytes + 4;
        transition parse_reth;
    }
    state parse_reth {
        pkt.extract(hdr.reth);
        meta.hdr_bytes = meta.hdr_bytes + 16;
        transition select(hdr.bth.opcode) {
            0xC9: parse_immdt;
            0xCB: parse_immdt;
            default: accept;
        }
    }
    state parse_immdt {
        pkt.extract(hdr.immdt);
        meta.hdr_bytes = meta.hdr_bytes + 4;
        transition accept;
    }
}

control MrcVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control MrcIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    counter(32w4096, CounterType.packets_and_bytes) rx_port_class;
    counter(32w16, CounterType.packets_and_bytes) drop_reason;
    register<bit<1>>(32w512) port_down;
    action_selector(HashAlgorithm.crc16, 32w1024, 32w16) ecmp_selector;

    action drop() {
        mark_to_drop(standard_metadata);
    }
    action set_nexthop(bit<9> port, bit<48> smac, bit<48> dmac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
        hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
        meta.routed = 1;
    }
    action route_ecmp(bit<16> group) {
        meta.next_group = group;
    }
    action route_ev(bit<16> group, bit<5> shift, bit<16> mask, bit<16> fallback) {
        meta.ev_group = group;
        meta.ev_field = (bit<16>)(meta.ev >> shift) & mask;
        meta.ev_fallback = fallback;
    }
    action usid_shift() {
        /* NEXT-C-SID: keep the 32-bit block, drop the active uSID, shift left, zero fill */
        hdr.ipv6.dst_addr = hdr.ipv6.dst_addr[127:96] ++ hdr.ipv6.dst_addr[79:0] ++ 16w0;
    }
    action usid_decap() {
        /* End of the uSID path at this switch: pop the outer IPv6 (and SRH).
           Without an inner header there is nothing to route: dropped in apply. */
        meta.decap = 1;
        /* the popped outer header (and SRH) no longer belong to the trim length */
        meta.hdr_bytes = meta.hdr_bytes - 40 - meta.srh_bytes;
        hdr.ipv6 = hdr.inner_ipv6;
        hdr.inner_ipv6.setInvalid();
        hdr.srh.setInvalid();
        hdr.segments[0].setInvalid();
        hdr.segments[1].setInvalid();
        hdr.segments[2].setInvalid();
        hdr.segments[3].setInvalid();
    }
    action set_class(bit<3> class_id, bit<3> priority, bit<1> trimmable) {
        meta.class_id = class_id;
        standard_metadata.priority = priority;
        meta.trimmable = trimmable;
    }

    table my_usid {
        key = { hdr.ipv6.dst_addr: lpm; }
        actions = { usid_shift; usid_decap; @defaultonly NoAction; }
        default_action = NoAction();
        size = 64;
    }
    table ipv6_route {
        key = { hdr.ipv6.dst_addr: lpm; }
        actions = { set_nexthop; route_ecmp; route_ev; drop; }
        default_action = drop();
        size = 1024;
    }
    table ecmp {
        key = {
            meta.next_group: exact;
            hdr.ipv6.src_addr: selector;
            hdr.ipv6.dst_addr: selector;
            hdr.ipv6.flow_label: selector;
            hdr.ipv6.next_hdr: selector;
            meta.l4_sport: selector;
            meta.l4_dport: selector;
        }
        /* An action-selector table has no default action on BMv2: a miss runs NoAction
           (meta.routed stays 0, so apply drops the packet and counts the reason). */
        actions = { set_nexthop; drop; @defaultonly NoAction; }
        implementation = ecmp_selector;
        size = 1024;
    }
    table ev_uplink {
        key = { meta.ev_group: exact; meta.ev_field: exact; }
        actions = { set_nexthop; drop; }
        default_action = drop();
        size = 4096;
    }
    table dscp_class {
        key = { meta.dscp: exact; }
        actions = { set_class; @defaultonly NoAction; }
        default_action = NoAction();
        size = 64;
    }

    apply {
        if (standard_metadata.parser_error != error.NoError) {
            drop_reason.count(DR_PARSE_ERROR);
            mark_to_drop(standard_metadata);
            return;
        }
        if (!hdr.ipv6.isValid()) {
            drop_reason.count(DR_NOT_IPV6);
            mark_to_drop(standard_metadata);
            return;
        }
        if ((bit<32>)hdr.ipv6.payload_len + 54 > standard_metadata.packet_length ||
            (hdr.udp.isValid() && (hdr.udp.length < 8 ||
             (bit<32>)hdr.udp.length + (bit<32>)meta.l4_offset > standard_metadata.packet_length))) {
            drop_reason.count(DR_BAD_LENGTH);
            mark_to_drop(standard_metadata);
            return;
        }
        meta.dscp = hdr.ipv6.dscp;
        dscp_class.apply();
        rx_port_class.count((bit<32>)standard_metadata.ingress_port * 8 + (bit<32>)meta.class_id);
        if (hdr.ipv6.hop_limit <= 1) {
            drop_reason.count(DR_HOP_LIMIT);
            mark_to_drop(standard_metadata);
            return;
        }
        if (my_usid.apply().hit) {
            if (meta.decap == 1) {
                if (!hdr.ipv6.isValid()) {
                    drop_reason.count(DR_USID_ERROR);
                    mark_to_drop(standard_metadata);
                    return;
                }
            }
            if (hdr.ipv6.dst_addr[95:80] == 0 && hdr.srh.isValid()) {
                if (hdr.srh.segments_left == 0 ||
                    hdr.srh.segments_left > hdr.srh.last_entry + 1) {
                    drop_reason.count(DR_USID_ERROR);
                    mark_to_drop(standard_metadata);
                    return;
                }
                hdr.srh.segments_left = hdr.srh.segments_left - 1;
                /* dst = segments[segments_left] (unrolled over the stack) */
                if (hdr.srh.segments_left == 0) { hdr.ipv6.dst_addr = hdr.segments[0].sid; }
                else if (hdr.srh.segments_left == 1) { hdr.ipv6.dst_addr = hdr.segments[1].sid; }
                else if (hdr.srh.segments_left == 2) { hdr.ipv6.dst_addr = hdr.segments[2].sid; }
                else { hdr.ipv6.dst_addr = hdr.segments[3].sid; }
            }
        }
        meta.ev = (bit<32>)hdr.ipv6.flow_label[15:0] << 16 | (bit<32>)meta.l4_sport;
        switch (ipv6_route.apply().action_run) {
            route_ecmp: { ecmp.apply(); }
            route_ev: {
                if (!ev_uplink.apply().hit) {
                    if (meta.ev_fallback != 0) {
                        meta.next_group = meta.ev_fallback;
                        ecmp.apply();
                    }
                } else {
                    port_down.read(meta.down, (bit<32>)standard_metadata.egress_spec);
                    if (meta.down == 1 && meta.ev_fallback != 0) {
                        meta.routed = 0;
                        hdr.ipv6.hop_limit = hdr.ipv6.hop_limit + 1;
                        meta.next_group = meta.ev_fallback;
                        ecmp.apply();
                    }
                }
            }
            default: { }
        }
        if (meta.routed == 0) {
            drop_reason.count(meta.ev_group != 0 ? DR_EV_MISS : DR_NO_ROUTE);
            mark_to_drop(standard_metadata);
            return;
        }
        if (standard_metadata.egress_spec == DROP_PORT) {
            drop_reason.count(DR_NO_ROUTE);
            mark_to_drop(standard_metadata);
            return;
        }
        port_down.read(meta.down, (bit<32>)standard_metadata.egress_spec);
        if (meta.down == 1) {
            drop_reason.count(DR_PORT_DOWN);
            mark_to_drop(standard_metadata);
        }
    }
}

control MrcEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    counter(32w4096, CounterType.packets_and_bytes) tx_port_class;
    counter(32w4096, CounterType.packets_and_bytes) tx_port_queue;
    counter(32w4096, CounterType.packets_and_bytes) trim_port_queue;
    counter(32w4096, CounterType.packets_and_bytes) ecn_port_queue;
    register<bit<19>>(32w4096) max_qdepth;

    /* thresholds in bytes queued (meta.enq_qdepth_bytes); 0 disables */
    action set_port_params(bit<32> ecn_threshold_bytes, bit<32> trim_threshold_bytes,
                           bit<1> last_hop, bit<6> trim_dscp, bit<3> trim_priority) {
        meta.ecn_threshold_bytes = ecn_threshold_bytes;
        meta.trim_threshold_bytes = trim_threshold_bytes;
        meta.last_hop = last_hop;
        meta.trim_dscp = trim_dscp;
        meta.trim_priority = trim_priority;
    }
    table port_config {
        key = { standard_metadata.egress_port: exact; }
        actions = { set_port_params; @defaultonly NoAction; }
        default_action = NoAction();
        size = 512;
    }

    apply {
#ifndef MRC_EMBEDDED_TARGET
        meta.enq_qdepth_bytes = (bit<32>)standard_metadata.enq_qdepth * BMV2_QDEPTH_CELL_BYTES;
#endif
        bit<32> cell = (bit<32>)standard_metadata.egress_port * 8 + (bit<32>)standard_metadata.priority;
        bit<19> seen;
        max_qdepth.read(seen, cell);
        if (standard_metadata.enq_qdepth > seen) { max_qdepth.write(cell, standard_metadata.enq_qdepth); }
        port_config.apply();
        if (meta.trimmable == 1 && meta.trim_threshold_bytes != 0 &&
            meta.enq_qdepth_bytes >= meta.trim_threshold_bytes) {
            trim_port_queue.count(cell);
            truncate((bit<32>)meta.hdr_bytes);
            bit<16> cut = (bit<16>)standard_metadata.packet_length - meta.hdr_bytes;
            hdr.ipv6.payload_len = hdr.ipv6.payload_len - cut;
            hdr.ipv6.dscp = meta.trim_dscp;
            if (hdr.inner_ipv6.isValid()) {
                hdr.inner_ipv6.payload_len = hdr.inner_ipv6.payload_len - cut;
                hdr.inner_ipv6.dscp = meta.trim_dscp;
            }
            hdr.udp.length = hdr.udp.length - cut;
            hdr.udp.checksum = 0;
            standard_metadata.priority = meta.trim_priority;   /* embedded target: selects the queue */
        } else if (meta.last_hop == 0 && meta.ecn_threshold_bytes != 0 && hdr.ipv6.ecn != 0 &&
                   meta.enq_qdepth_bytes >= meta.ecn_threshold_bytes) {
            hdr.ipv6.ecn = 3;
            ecn_port_queue.count(cell);
        }
        tx_port_class.count((bit<32>)standard_metadata.egress_port * 8 + (bit<32>)meta.class_id);
        /* the queue the packet joins (a trimmed packet: its new priority) */
        tx_port_queue.count((bit<32>)standard_metadata.egress_port * 8 +
                            (bit<32>)standard_metadata.priority);
    }
}

control MrcComputeChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control MrcDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv6);
        pkt.emit(hdr.srh);
        pkt.emit(hdr.segments);
        pkt.emit(hdr.inner_ipv6);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.bth);
        pkt.emit(hdr.meth);
        pkt.emit(hdr.tseth);
        pkt.emit(hdr.reth);
        pkt.emit(hdr.immdt);
    }
}

V1Switch(MrcParser(), MrcVerifyChecksum(), MrcIngress(), MrcEgress(), MrcComputeChecksum(),
         MrcDeparser()) main;
