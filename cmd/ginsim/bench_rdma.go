package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/fabric/topo"
	"github.com/ginsim/ginsim/nic/perftest"
	"github.com/ginsim/ginsim/traces/pcap"
)

func init() {
	Register("bench", func() *cobra.Command { return newBenchRDMACmd("write_lat") })
	Register("bench", func() *cobra.Command { return newBenchRDMACmd("write_bw") })
	Register("bench", func() *cobra.Command { return newBenchRDMACmd("atomic_lat") })
}

// parseSizes parses "8,4096,1048576"; empty means 8 B to 1 GiB by powers of
// two.
func parseSizes(s string) ([]int64, error) {
	if s == "" {
		var out []int64
		for b := int64(8); b <= 1<<30; b *= 2 {
			out = append(out, b)
		}
		return out, nil
	}
	var out []int64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || v < 1 || v > 1<<31 {
			return nil, fmt.Errorf("bad size %q: want an integer in [1, 2^31]", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func newBenchRDMACmd(kind string) *cobra.Command {
	var (
		sizes     string
		asJSON    bool
		pcapFile  string
		pcapMax   int
		topoKind  string
		gpuMem    bool
		mtu       int
		txDepth   int
		maxVolume int64
		maxIters  int
		seed      uint64
	)
	short := map[string]string{
		"write_lat":  "RDMA WRITE ping-pong latency between two nodes (ib_write_lat)",
		"write_bw":   "RDMA WRITE streaming bandwidth between two nodes (ib_write_bw)",
		"atomic_lat": "RDMA FETCH_AND_ADD round-trip latency between two nodes (ib_atomic_lat)",
	}[kind]
	cmd := &cobra.Command{
		Use:   kind,
		Short: short,
		Long: short + `.

Two nodes of a modelled cluster (one ConnectX-7-class 400G NIC each, PCIe Gen5)
run the perftest pattern on the nic model: write_lat reports half the round
trip of a WRITE ping-pong in which each side spins on the last byte of its
buffer; write_bw keeps --tx-depth signaled WRITEs outstanding; atomic_lat
posts one 8-byte FETCH_AND_ADD at a time and waits for its completion (the
full round trip; --sizes does not apply). Every
timing comes from the simulated doorbells, DMA reads and writes, packets and
ACKs. The simulated volume per size is capped by --max-volume.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			sz, err := parseSizes(sizes)
			if err != nil {
				return Usagef("--sizes: %v", err)
			}
			if kind == "atomic_lat" && sizes != "" {
				return Usagef("--sizes: atomic_lat moves 8 bytes; it takes no sizes")
			}
			if mtu != 256 && mtu != 512 && mtu != 1024 && mtu != 2048 && mtu != 4096 {
				return Usagef("--mtu must be 256, 512, 1024, 2048 or 4096, got %d", mtu)
			}
			if txDepth < 1 {
				return Usagef("--tx-depth must be at least 1, got %d", txDepth)
			}
			o := perftest.Options{Sizes: sz, Topo: topo.Spec{Kind: topoKind, Spines: 1}, MTU: mtu, GPUMem: gpuMem,
				TxDepth: txDepth, MaxVolume: maxVolume, MaxIters: maxIters, Seed: seed}
			if topoKind == topo.KindSingle {
				o.Topo.Spines = 0
			}
			var pw *pcap.Writer
			var pf *os.File
			var bw *bufio.Writer
			if pcapFile != "" {
				pf, err = os.Create(pcapFile)
				if err != nil {
					return err
				}
				defer pf.Close()
				bw = bufio.NewWriter(pf)
				pw, err = pcap.NewWriter(bw)
				if err != nil {
					return err
				}
				var ifs [2]int
				for i := range ifs {
					if ifs[i], err = pw.AddInterface(fmt.Sprintf("n%d/nic0", i), "simulated ConnectX-7 port"); err != nil {
						return err
					}
				}
				written := 0
				var werr error
				o.Tap = func(node int, c *topo.Cluster, p *fabric.Packet) {
					if written >= pcapMax || werr != nil {
						return
					}
					written++
					spec := roce.FrameSpec{SrcMAC: c.MAC(p.Src), DstMAC: c.MAC(p.Dst), SrcPort: p.SrcPort, ECN: p.ECN}
					sip, dip := c.IP(p.Src), c.IP(p.Dst)
					copy(spec.SrcIP[:], sip[:])
					copy(spec.DstIP[:], dip[:])
					werr = pw.WriteRoCE(ifs[node], c.Net.Sim().Now(), &spec, &p.Hdr, int(p.PayloadLen),
						fmt.Sprintf("pkt %d qp %#x wqe %d", p.ID, p.Tag>>40, p.Tag&(1<<40-1)))
				}
				defer func() {
					if werr != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "ginsim: pcap: %v\n", werr)
					}
				}()
			}
			run := map[string]func(perftest.Options) ([]perftest.Row, error){
				"write_lat": perftest.WriteLat, "write_bw": perftest.WriteBW, "atomic_lat": perftest.AtomicLat,
			}[kind]
			rows, err := run(o)
			if err != nil {
				return err
			}
			if pw != nil {
				if err := pw.Flush(); err != nil {
					return err
				}
				if err := bw.Flush(); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(w, "bytes\titers\tlatency_us\tbandwidth_GBps\tGb/s\t")
			for _, r := range rows {
				fmt.Fprintf(w, "%d\t%d\t%.3f\t%.3f\t%.1f\t\n", r.Bytes, r.Iters, r.LatencyUs, r.BandwidthGBps, r.BandwidthGBps*8)
			}
			return w.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&sizes, "sizes", "", "comma-separated message sizes in bytes (default 8 B to 1 GiB by powers of two)")
	f.BoolVar(&asJSON, "json", false, "print rows as a JSON array")
	f.StringVar(&pcapFile, "pcap", "", "write the packets of both NICs to this pcapng file")
	f.IntVar(&pcapMax, "pcap-max", 100000, "most packets written to --pcap")
	f.StringVar(&topoKind, "topo", topo.KindSingle, "cluster topology: single | leafspine")
	f.BoolVar(&gpuMem, "gpu-mem", false, "buffers in GPU memory (GPUDirect RDMA, perftest --use_cuda)")
	f.IntVar(&mtu, "mtu", 4096, "path MTU")
	f.IntVar(&txDepth, "tx-depth", 128, "outstanding WRITEs (write_bw)")
	f.Int64Var(&maxVolume, "max-volume", 256<<20, "cap on the bytes simulated per size")
	f.IntVar(&maxIters, "max-iters", 1000, "cap on iterations per size")
	f.Uint64Var(&seed, "seed", 1, "random seed")
	return cmd
}
