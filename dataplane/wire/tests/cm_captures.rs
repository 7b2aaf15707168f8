//! Every CM MAD in the rdma_cm captures of Linux rxe travels as rxe sends CM MADs (UD SEND
//! Only to QP1, Q_Key 0x80010000, source QP 1, 256 bytes of payload, UDP source port
//! 55410), parses as the message tshark names, answers the transaction it belongs to, and
//! is rebuilt byte for byte from its parsed form.

mod common;

use common::{read_pcap, summaries};
use xroce_wire::cm::ip_cm::{IpCmPacket, IpCmRepr};
use xroce_wire::mad::{GSI_QKEY, GSI_QPN, MAD_LEN};
use xroce_wire::source_port::rxe_initial_udp_source_port;
use xroce_wire::{CmMad, CmMessage, Frame, Opcode};

fn tshark_name(message: &CmMessage<'_>) -> &'static str {
    match message {
        CmMessage::Req(_) => "CM: ConnectRequest",
        CmMessage::Rep(_) => "CM: ConnectReply",
        CmMessage::Rtu(_) => "CM: ReadyToUse",
        CmMessage::Dreq(_) => "CM: DisconnectRequest",
        CmMessage::Drep(_) => "CM: DisconnectReply",
        other => panic!("not in the captures: {other:?}"),
    }
}

#[test]
fn captured_cm_mads_parse_and_rebuild() {
    let mut total = 0;
    for name in ["rping_rdma_cm", "write_bw_rdma_cm"] {
        let path = common::fixtures().join(format!("{name}.pcap"));
        let frames = read_pcap(&path);
        let txt = std::fs::read_to_string(path.with_extension("txt")).unwrap();
        let names = summaries(&txt);
        let mut requests = Vec::new();
        for (i, bytes) in frames.iter().enumerate() {
            let n = i + 1;
            let Ok(frame) = Frame::parse(bytes) else {
                continue;
            };
            if frame.ib.bth.dest_qp != GSI_QPN {
                continue;
            }
            total += 1;
            let ctx = format!("{name} frame {n}");
            assert_eq!(frame.ib.bth.opcode, Opcode::UD_SEND_ONLY, "{ctx}");
            assert!(
                frame.ib.bth.ack_request,
                "{ctx}: rxe asks for an ACK on QP1"
            );
            let deth = frame.ib.deth.expect("UD carries a DETH");
            assert_eq!(deth.qkey, GSI_QKEY, "{ctx}");
            assert_eq!(deth.src_qp, GSI_QPN, "{ctx}");
            assert_eq!(
                frame.headers.udp.src_port,
                rxe_initial_udp_source_port(GSI_QPN)
            );
            assert_eq!(frame.headers.udp.src_port, 55410);
            assert_eq!(frame.payload.len(), MAD_LEN, "{ctx}");

            let mad = CmMad::parse(frame.payload).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert_eq!(
                names.get(&n).map(|s| s.name.as_str()),
                Some(tshark_name(&mad.message)),
                "{ctx}"
            );
            assert_eq!(mad.attribute_modifier, 0, "{ctx}: no ECE from rxe");
            assert_eq!(mad.to_bytes().unwrap(), frame.payload, "{ctx}");

            // Requests carry the initiator's TID; answers echo the TID of what they answer.
            match mad.message {
                CmMessage::Req(req) => {
                    let ip_cm = IpCmPacket::new_checked(req.private_data).unwrap();
                    let ip_cm = IpCmRepr::parse(&ip_cm).unwrap();
                    assert_eq!(ip_cm.src_addr, frame.headers.ip.src_addr(), "{ctx}");
                    assert_eq!(ip_cm.dst_addr, frame.headers.ip.dst_addr(), "{ctx}");
                    // The Linux CM forms the TID's low word from the comm ID as stored in
                    // memory (little-endian host): byte-swapped.
                    assert_eq!(
                        mad.transaction_id as u32,
                        req.local_comm_id.0.swap_bytes(),
                        "{ctx}"
                    );
                    requests.push((req.local_comm_id, mad.transaction_id));
                }
                CmMessage::Dreq(dreq) => {
                    assert_eq!(
                        mad.transaction_id as u32,
                        dreq.local_comm_id.0.swap_bytes(),
                        "{ctx}: a DREQ starts an exchange with the sender's TID"
                    );
                }
                CmMessage::Rep(rep) => {
                    assert!(
                        requests.contains(&(rep.remote_comm_id, mad.transaction_id)),
                        "{ctx}"
                    );
                }
                CmMessage::Rtu(rtu) => {
                    assert!(
                        requests.contains(&(rtu.local_comm_id, mad.transaction_id)),
                        "{ctx}"
                    );
                }
                CmMessage::Drep(_) => {}
                _ => unreachable!(),
            }
        }
    }
    assert_eq!(total, 15);
}
