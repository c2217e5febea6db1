/*
 * ocs.p4 -- optical circuit switch model (P4_16, v1model).
 *
 * An OCS forwards light, not packets: any frame (even garbage) entering a port leaves on the
 * port it is cross-connected to. Reconfiguration is driven by the controller, drop then
 * connect: it first sets the cross_connect entry of every input port whose circuit changes to
 * dark() (the mirrors are moving: frames are dropped and counted in dark_drops[in_port]),
 * waits out the reconfiguration delay, then writes the new connect(port) entries (or deletes
 * the entry of a port left unconnected). A port without an entry drops (default drop()).
 * docs/switch.md gives the exact protocol. Names, ids and widths: common/p4schema/ocs.py.
 */
#include <core.p4>
#include <v1model.p4>

header raw_t { bit<8> first; }
struct headers_t { raw_t unused; }
struct metadata_t { }

parser OcsParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start { transition accept; }   /* optical: payload is opaque */
}

control OcsVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control OcsIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    counter(32w512, CounterType.packets_and_bytes) rx_port;
    counter(32w512, CounterType.packets_and_bytes) dark_drops;

    action drop() { mark_to_drop(standard_metadata); }
    action connect(bit<9> port) { standard_metadata.egress_spec = port; }
    action dark() {
        dark_drops.count((bit<32>)standard_metadata.ingress_port);
        mark_to_drop(standard_metadata);
    }

    table cross_connect {
        key = { standard_metadata.ingress_port: exact; }
        actions = { connect; dark; drop; }
        default_action = drop();
        size = 512;
    }

    apply {
        rx_port.count((bit<32>)standard_metadata.ingress_port);
        cross_connect.apply();
    }
}

control OcsEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    counter(32w512, CounterType.packets_and_bytes) tx_port;
    apply { tx_port.count((bit<32>)standard_metadata.egress_port); }
}

control OcsComputeChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control OcsDeparser(packet_out pkt, in headers_t hdr) { apply { } }

V1Switch(OcsParser(), OcsVerifyChecksum(), OcsIngress(), OcsEgress(), OcsComputeChecksum(),
         OcsDeparser()) main;
