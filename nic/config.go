package nic

import (
	"fmt"

	"github.com/ginsim/ginsim/sim"
)

// TxArbitration says how the port's transmit scheduler shares the link among
// QPs that have packets ready.
type TxArbitration uint8

// Transmit arbitration policies.
const (
	// ArbPacket serves ready QPs round-robin one packet at a time.
	ArbPacket TxArbitration = iota
	// ArbWQE keeps serving a QP until the message it is sending is fully
	// out (or it stalls), then moves to the next ready QP.
	ArbWQE
)

// Config holds the NIC's timing constants and limits. Every duration is the
// latency or occupancy of one hardware step; DefaultConfig documents the
// fact each default stands for.
type Config struct {
	// Mutations break the model on purpose (the mutants of gin/verify,
	// the GIN conformance suite); zero in every real run.
	Mutations Mutations
	// DoorbellCost is the time from a doorbell MMIO arriving at the NIC to
	// its first WQE fetch being issued (doorbell FIFO, QP context lookup).
	DoorbellCost sim.Duration
	// BlueFlame makes PostSend of a single WR push the WQE with the
	// doorbell (a 64-byte write-combined MMIO), skipping the WQE fetch, as
	// mlx5 does for one WR when BlueFlame registers are available.
	BlueFlame bool
	// WQEBytes is the size of one send WQE in the SQ ring (one 64-byte
	// WQEBB; inline data up to 8 bytes fits in it).
	WQEBytes sim.Bytes
	// FetchBatch is the most WQEs fetched by one DMA read.
	FetchBatch int
	// FetchOutstanding is the most WQE fetch reads in flight per QP.
	FetchOutstanding int
	// WQECost is the per-WQE occupancy of the send pipeline after fetch
	// (parse, address translation, context update).
	WQECost sim.Duration
	// PayloadPrefetch is the most payload DMA reads (one per packet) a QP
	// keeps in flight or buffered ahead of its transmitter.
	PayloadPrefetch int
	// ReadAhead is the most payload reads (packets of up to one MTU) the
	// whole NIC keeps in flight or buffered ahead of transmission, over all
	// its QPs: the DMA engine's outstanding PCIe read tags and on-chip
	// staging are shared, so many busy QPs cannot each read PayloadPrefetch
	// packets ahead and flood the PCIe link with completions.
	ReadAhead int
	// TxPacketCost is the transmit pipeline's occupancy per packet (header
	// build, ICRC): it bounds the packet rate of the port.
	TxPacketCost sim.Duration
	// TxLatency is the pipeline latency from a packet being scheduled to its
	// first bit entering the port's MAC.
	TxLatency sim.Duration
	// RxPacketCost is the receive pipeline's occupancy per packet.
	RxPacketCost sim.Duration
	// RxLatency is the receive pipeline latency from the last bit arriving
	// to the packet being processed (parse, ICRC, QP context lookup).
	RxLatency sim.Duration
	// AckDelay is the time from processing a request that asks for an ACK
	// to the ACK being ready to send; ACKs generated for the same QP
	// before an unsent one leaves are coalesced into it.
	AckDelay sim.Duration
	// AckReqEvery makes the requester set AckReq on every n-th packet of a
	// long message in addition to the last one (0: last packet only).
	AckReqEvery int
	// CQECost is the time from a completion being decided to its 64-byte
	// CQE DMA write being issued.
	CQECost sim.Duration
	// CQEBytes is the size of one CQE in the CQ ring.
	CQEBytes sim.Bytes
	// RecvWQECost is the responder's time to take a receive WQE (SEND and
	// WRITE with immediate).
	RecvWQECost sim.Duration
	// MaxRdAtomic caps QPConfig.MaxRdAtomic and ModifyAttr's read/atomic
	// depths (max_qp_rd_atom / max_qp_init_rd_atom).
	MaxRdAtomic int
	// TxArb is the transmit arbitration policy between QPs.
	TxArb TxArbitration
	// ECT marks data packets ECN-capable (ECT(0)). DCQCN implies it.
	ECT bool
	// DCQCN enables DCQCN congestion control: the NIC answers CE-marked
	// packets with CNPs (notification point) and each QP rate-limits
	// itself on CNPs (reaction point). See DCQCNConfig.
	DCQCN bool
	// CC holds the DCQCN parameters.
	CC DCQCNConfig
}

// DefaultConfig returns ConnectX-7 400G-class defaults.
func DefaultConfig() Config {
	return Config{
		DoorbellCost:     40 * sim.Nanosecond,  // doorbell UAR write decoded and QP scheduled: tens of ns in CX-class NICs
		BlueFlame:        true,                 // mlx5 posts single WRs through the BlueFlame buffer
		WQEBytes:         64,                   // one mlx5 WQEBB
		FetchBatch:       8,                    // a 512-byte read: CX NICs fetch several WQEBBs per descriptor read
		FetchOutstanding: 4,                    // a few fetches per QP in flight keep small-message rates near 100 Mpps
		WQECost:          5 * sim.Nanosecond,   // ~200 M WQE/s per send engine
		PayloadPrefetch:  32,                   // 128 KiB of 4 KiB reads in flight covers a ~1 us PCIe read round trip at 50 GB/s
		ReadAhead:        96,                   // 384 KiB: 768 PCIe 10-bit tags x 512-byte read requests
		TxPacketCost:     3 * sim.Nanosecond,   // ~330 Mpps per port, CX-7's message-rate class
		TxLatency:        150 * sim.Nanosecond, // CX-7 port-to-port latency is a few hundred ns end to end
		RxPacketCost:     3 * sim.Nanosecond,   // receive packet rate matches transmit
		RxLatency:        150 * sim.Nanosecond, // see TxLatency
		AckDelay:         50 * sim.Nanosecond,  // ACK generation in the responder's send path
		AckReqEvery:      32,                   // periodic AckReq keeps the requester's window moving on long messages
		CQECost:          20 * sim.Nanosecond,  // completion engine builds the CQE
		CQEBytes:         64,                   // mlx5 CQE size
		RecvWQECost:      20 * sim.Nanosecond,  // receive WQE lookup (RQ cached on the NIC)
		MaxRdAtomic:      16,                   // CX-7 max_qp_rd_atom
		TxArb:            ArbPacket,            // per-packet round robin between send queues
		ECT:              true,                 // RoCEv2 data packets are ECN-capable for DCQCN
		DCQCN:            true,                 // mlx5 enables DCQCN on RoCE ports by default
		CC:               DefaultDCQCNConfig(), // DCQCN paper / mlx5 parameters
	}
}

// Validate reports an unusable configuration.
func (c *Config) Validate() error {
	switch {
	case c.WQEBytes <= 0 || c.CQEBytes < 8:
		return fmt.Errorf("nic: WQEBytes %d and CQEBytes %d must be positive (CQE >= 8)", c.WQEBytes, c.CQEBytes)
	case c.ReadAhead < 1:
		return fmt.Errorf("nic: ReadAhead %d must be >= 1", c.ReadAhead)
	case c.FetchBatch < 1 || c.FetchOutstanding < 1 || c.PayloadPrefetch < 1:
		return fmt.Errorf("nic: FetchBatch %d, FetchOutstanding %d and PayloadPrefetch %d must be >= 1",
			c.FetchBatch, c.FetchOutstanding, c.PayloadPrefetch)
	case c.MaxRdAtomic < 1:
		return fmt.Errorf("nic: MaxRdAtomic %d must be >= 1", c.MaxRdAtomic)
	case c.DoorbellCost < 0 || c.WQECost < 0 || c.TxPacketCost < 0 || c.TxLatency < 0 || c.RxPacketCost < 0 ||
		c.RxLatency < 0 || c.AckDelay < 0 || c.CQECost < 0 || c.RecvWQECost < 0:
		return fmt.Errorf("nic: negative duration in config")
	}
	if c.DCQCN {
		return c.CC.validate()
	}
	return nil
}

// AckTimeout returns the IBTA local ACK timeout for the 5-bit code t:
// 4.096 us * 2^t; 0 means infinite (returned as 0).
func AckTimeout(t uint8) sim.Duration {
	if t == 0 {
		return 0
	}
	return 4096 * sim.Nanosecond << (t & 31)
}

// rnrTimerTable is the IBTA minimum RNR NAK timer table (code -> delay).
var rnrTimerTable = [32]sim.Duration{
	655360 * sim.Microsecond / 1000, 10 * sim.Microsecond, 20 * sim.Microsecond, 30 * sim.Microsecond,
	40 * sim.Microsecond, 60 * sim.Microsecond, 80 * sim.Microsecond, 120 * sim.Microsecond,
	160 * sim.Microsecond, 240 * sim.Microsecond, 320 * sim.Microsecond, 480 * sim.Microsecond,
	640 * sim.Microsecond, 960 * sim.Microsecond, 1280 * sim.Microsecond, 1920 * sim.Microsecond,
	2560 * sim.Microsecond, 3840 * sim.Microsecond, 5120 * sim.Microsecond, 7680 * sim.Microsecond,
	10240 * sim.Microsecond, 15360 * sim.Microsecond, 20480 * sim.Microsecond, 30720 * sim.Microsecond,
	40960 * sim.Microsecond, 61440 * sim.Microsecond, 81920 * sim.Microsecond, 122880 * sim.Microsecond,
	163840 * sim.Microsecond, 245760 * sim.Microsecond, 327680 * sim.Microsecond, 491520 * sim.Microsecond,
}

// RNRTimer returns the IBTA minimum RNR NAK timer for the 5-bit code
// (code 0 is 655.36 ms, code 1 is 0.01 ms, ... code 31 is 491.52 ms).
func RNRTimer(code uint8) sim.Duration { return rnrTimerTable[code&31] }

// Mutations are deliberately broken NIC behaviours (bit flags).
type Mutations uint32

// The NIC mutants.
const (
	// MutAckAhead: the responder acknowledges an out-of-order request's
	// PSN (the packets before it not yet received) instead of NAKing the
	// gap, so the requester never resends them.
	MutAckAhead Mutations = 1 << iota
	// MutDupAtomic: the responder executes a duplicate atomic request
	// again instead of replaying its saved result.
	MutDupAtomic
)
