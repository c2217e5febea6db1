/*
 * ocs.p4 -- optical circuit switch model (P4_16, v1model).
 *
 * An OCS forwards light, not packets: any frame (even garbage) entering a port leaves on the
 * port it is cross-connected to. While a circuit is being reconfigured the affected ports are
 * dark: frames are dropped until dark_until[port] (switch clock, microseconds).
 * Names, ids and widths: common/p4schema/ocs.py. The embedded target sets dark_until for the
 * ports a cross_connect write touches (see docs/switch.md).
 */
#include <core.p4>
#include <v1model.p4>

header raw_t { bit<8> first; }
struct headers_t { raw_t unused; }
struct metadata_t { bit<48> until_in; bit<48> until_out; }

parser OcsParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start { transition accept; }   /* optical: payload is opaque */
}

control OcsVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control OcsIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    counter(32w512, CounterType.packets_and_bytes) rx_port;
    counter(32w512, CounterType.packets_and_bytes) dark_drops;
    register<bit<48>>(32w512) dark_until;
    register<bit<32>>(32w1) reconfig_delay_us;

    action drop() { mark_to_drop(standard_metadata); }
    action connect(bit<9> port) { standard_metadata.egress_spec = port; }

    table cross_connect {
        key = { standard_metadata.ingress_port: exact; }
        actions = { connect; drop; }
        default_action = drop();
        size = 512;
    }

    apply {
        rx_port.count((bit<32>)standard_metadata.ingress_port);
        dark_until.read(meta.until_in, (bit<32>)standard_metadata.ingress_port);
        if (standard_metadata.ingress_global_timestamp < meta.until_in) {
            dark_drops.count((bit<32>)standard_metadata.ingress_port);
            mark_to_drop(standard_metadata);
            return;
        }
        cross_connect.apply();
        if (standard_metadata.egress_spec != 511) {
            dark_until.read(meta.until_out, (bit<32>)standard_metadata.egress_spec);
            if (standard_metadata.ingress_global_timestamp < meta.until_out) {
                dark_drops.count((bit<32>)standard_metadata.ingress_port);
                mark_to_drop(standard_metadata);
            }
        }
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
