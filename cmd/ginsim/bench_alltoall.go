package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/ginsim/ginsim/fabric/topo"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/internal/memsample"
	"github.com/ginsim/ginsim/internal/par"
	"github.com/ginsim/ginsim/nic"
	"github.com/ginsim/ginsim/nic/perftest"
	"github.com/ginsim/ginsim/sim"
)

func init() { Register("bench", newBenchAllToAllCmd) }

// allToAllReport is bench alltoall's result, in the JSON shape. Every
// field but Run is the same for every --workers.
type allToAllReport struct {
	Topology     string `json:"topology"`
	Hosts        int    `json:"hosts"`
	Switches     int    `json:"switches"`
	Links        int    `json:"links"`
	BytesPerPair int64  `json:"bytes_per_pair"`
	MTU          int    `json:"mtu"`
	Seed         uint64 `json:"seed"`
	// Partitions is the number of partitions of the World and Windows
	// the lookahead windows it ran (the same on both kernels).
	Partitions   int     `json:"partitions"`
	Windows      uint64  `json:"windows"`
	Events       uint64  `json:"events"`
	Traversals   uint64  `json:"link_traversals"`
	DataPackets  uint64  `json:"data_packets"`
	Retransmits  uint64  `json:"retransmits"`
	ACKs         uint64  `json:"acks"`
	CNPs         uint64  `json:"cnps"`
	Drops        uint64  `json:"drops"`
	ECNMarks     uint64  `json:"ecn_marks"`
	CompletionUs float64 `json:"completion_us"`
	FCT          struct {
		MinUs  float64 `json:"min_us"`
		MeanUs float64 `json:"mean_us"`
		P50Us  float64 `json:"p50_us"`
		P99Us  float64 `json:"p99_us"`
		MaxUs  float64 `json:"max_us"`
	} `json:"fct"`
	// Run is how this run went on this machine: not deterministic.
	Run allToAllRun `json:"run"`
}

// allToAllRun is the machine-dependent part of bench alltoall's report.
type allToAllRun struct {
	Workers     int     `json:"workers"`
	WallSeconds float64 `json:"wall_s"`
	CPUSeconds  float64 `json:"cpu_s"` // user+system CPU of the process during the run (GC included)
	EventsPerS  float64 `json:"events_per_s"`
	TravPerS    float64 `json:"link_traversals_per_s"`
	PeakHeapMiB float64 `json:"peak_heap_MiB"`
}

func newBenchAllToAllCmd() *cobra.Command {
	var (
		hosts     int
		bytes     int64
		topoKind  string
		k         int
		cluster   string
		linkGbps  int64
		linkLat   time.Duration
		switchLat time.Duration
		ackEvery  int
		lossless  bool
		seed      uint64
		asJSON    bool
		workers   int
		parts     int
	)
	cmd := &cobra.Command{
		Use:   "alltoall",
		Short: "All-to-all of RC QPs through the NIC and fabric models (htsim's RoCE workload)",
		Long: `alltoall gives every one of --hosts NIC ports an RC QP to every other and has
each write --bytes to each, all at once, 4 KiB MTU, through the full NIC model
(doorbells, WQE and payload DMA over PCIe, per-packet transmit and receive
pipelines, ACKs, DCQCN) and the packet-level fabric. It reports the wall time,
the events fired and link traversals (packet-hops) per second of wall time,
the packets and ACKs sent, the simulated completion time and per-flow
completion times (post to CQE at the requester).

It runs on the parallel kernel: a World of --partitions partitions (default:
one per node; with --cluster a node holds 8 NIC ports, otherwise one) run by
--workers goroutines (default: every core). The results depend on the
partitions, never on the workers; --workers 0 runs the same partitions on the
sequential kernel (one event at a time, the reference), with the same results.
The JSON's "run" object (workers, wall and CPU time, rates, peak heap) is the
only part that changes from run to run.

The default network is a three-tier k-ary fat tree (k^3/4 host ports, the
smallest even k that holds --hosts unless --k is given) of --link-gbps links
with --link-latency propagation delay, as htsim's RoCE experiments use.
--cluster NAME|FILE runs on a cluster's fabric instead (the rail-optimised
presets: 8 NICs per node, its link rate, cable delay, switches and NIC
profile); --hosts must then be a multiple of its NICs per node.

  ginsim bench alltoall --hosts 128 --bytes 1048576      # htsim_roce's 128-host case
  ginsim bench alltoall --hosts 1024 --bytes 65536
  ginsim bench alltoall --hosts 128 --cluster h100-ib
  ginsim bench alltoall --hosts 128 --workers 0           # the sequential kernel`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if hosts < 2 {
				return Usagef("--hosts must be at least 2, got %d", hosts)
			}
			if bytes < 1 || bytes > 1<<31 {
				return Usagef("--bytes must be in [1, 2^31], got %d", bytes)
			}
			if ackEvery < 0 {
				return Usagef("--ack-every must not be negative, got %d", ackEvery)
			}
			if workers < 0 || parts < 0 {
				return Usagef("--workers and --partitions must not be negative, got %d and %d", workers, parts)
			}
			o := perftest.AllToAllOptions{Bytes: bytes, AckEvery: ackEvery, Seed: seed}
			name := topoKind
			if cluster != "" {
				spec, err := resolveCluster(cluster)
				if err != nil {
					return err
				}
				per := spec.GPUsPerNode * spec.NICsPerGPU
				if hosts%per != 0 {
					return Usagef("--hosts %d is not a multiple of cluster %s's %d NICs per node", hosts, spec.Name, per)
				}
				nodes, err := spec.NodesFor(hosts / spec.NICsPerGPU)
				if err != nil {
					return err
				}
				prof, err := spec.Hardware()
				if err != nil {
					return err
				}
				o.Topo = machine.TopoSpec(spec, nodes)
				o.Topo.PCIe, o.Topo.NVLink = &prof.PCIe, &prof.NVLink
				o.NIC = prof.NIC
				name = spec.Name + " (" + spec.Topology.Kind + ")"
			} else {
				if linkGbps < 1 {
					return Usagef("--link-gbps must be positive, got %d", linkGbps)
				}
				if linkLat < 0 || switchLat < 0 {
					return Usagef("--link-latency and --switch-latency must not be negative")
				}
				o.Topo = topo.Spec{Kind: topoKind, Nodes: hosts, GPUsPerNode: 1, LinkGbps: linkGbps,
					HostPropNs: linkLat.Nanoseconds(), FabricPropNs: linkLat.Nanoseconds(),
					Switch: topo.SwitchSpec{LatencyNs: switchLat.Nanoseconds()}}
				switch topoKind {
				case topo.KindFatTree:
					o.Topo.K = k
				case topo.KindSingle:
				default:
					return Usagef("--topo %q: want fattree or single (use --cluster for rail-optimised fabrics)", topoKind)
				}
				if err := o.Topo.Validate(); err != nil {
					return Usagef("%v", err)
				}
				o.NIC = nic.DefaultConfig()
				if lossless {
					o.Topo.Switch.PortBufferKiB = -1
					o.NIC.ECT, o.NIC.DCQCN = false, false
				}
				if topoKind == topo.KindFatTree {
					kk := k
					if kk == 0 {
						kk = 2
						for topo.FatTreeHosts(kk) < hosts {
							kk += 2
						}
					}
					name = fmt.Sprintf("fattree k=%d", kk)
				}
			}
			o.Parts = parts
			if o.Parts == 0 {
				o.Parts = o.Topo.Nodes
			}
			o.Sequential = workers == 0
			if workers > 0 {
				pool := par.NewPool(workers)
				defer pool.Close()
				o.Exec, o.SerialBelow = pool.Exec, sim.DefaultSerialBelow
			}
			runtime.GC()
			stop := memsample.Start(20 * time.Millisecond)
			start, cpu0 := time.Now(), cpuTime()
			r, err := perftest.AllToAll(o)
			wall, cpu := time.Since(start), cpuTime()-cpu0
			peak := stop()
			if err != nil {
				return err
			}
			st := r.Stats()
			rep := allToAllReport{Topology: name, Hosts: r.Hosts, Switches: r.Switches, Links: r.Links,
				BytesPerPair: bytes, MTU: 4096, Seed: seed, Partitions: o.Parts, Windows: r.Windows,
				Events: r.Events, Traversals: r.Traversals,
				DataPackets: r.DataPackets, Retransmits: r.Retransmits, ACKs: r.ACKs, CNPs: r.CNPs,
				Drops: r.Drops, ECNMarks: r.ECNMarks, CompletionUs: r.Completion.Sub(0).Us(),
				Run: allToAllRun{Workers: workers, WallSeconds: wall.Seconds(), CPUSeconds: cpu.Seconds(),
					EventsPerS: float64(r.Events) / wall.Seconds(), TravPerS: float64(r.Traversals) / wall.Seconds(),
					PeakHeapMiB: float64(peak.Total) / (1 << 20)}}
			rep.FCT.MinUs, rep.FCT.MeanUs, rep.FCT.P50Us, rep.FCT.P99Us, rep.FCT.MaxUs =
				st.Min.Us(), st.Mean.Us(), st.P50.Us(), st.P99.Us(), st.Max.Us()
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			fmt.Fprintf(w, "all-to-all: %d hosts, %s (%d switches, %d links), %d B per pair, MTU 4096, seed %d\n",
				rep.Hosts, rep.Topology, rep.Switches, rep.Links, bytes, seed)
			fmt.Fprintf(w, "%d partitions, %d windows\n", o.Parts, r.Windows)
			fmt.Fprintf(w, "events %d, link traversals %d\n", rep.Events, rep.Traversals)
			fmt.Fprintf(w, "data packets %d, retransmits %d, ACKs %d, CNPs %d, drops %d, ECN marks %d\n",
				rep.DataPackets, rep.Retransmits, rep.ACKs, rep.CNPs, rep.Drops, rep.ECNMarks)
			fmt.Fprintf(w, "completion %v; FCT min %v mean %v p50 %v p99 %v max %v\n",
				r.Completion.Sub(0), st.Min, st.Mean, st.P50, st.P99, st.Max)
			ru := rep.Run
			kernel := fmt.Sprintf("%d workers", ru.Workers)
			if ru.Workers == 0 {
				kernel = "the sequential kernel"
			}
			fmt.Fprintf(w, "this run (not deterministic): %s, wall %.2f s, CPU %.2f s, %.2f M events/s, %.2f M traversals/s, peak heap %.0f MiB\n",
				kernel, ru.WallSeconds, ru.CPUSeconds, ru.EventsPerS/1e6, ru.TravPerS/1e6, ru.PeakHeapMiB)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&hosts, "hosts", 128, "NIC ports taking part (one RC QP per ordered pair)")
	f.Int64Var(&bytes, "bytes", 1<<20, "bytes each host writes to each other host")
	f.StringVar(&topoKind, "topo", topo.KindFatTree, "network without --cluster: fattree | single")
	f.IntVar(&k, "k", 0, "fat tree radix (even; 0: the smallest that holds --hosts)")
	f.StringVar(&cluster, "cluster", "", "run on this cluster preset's or file's fabric and NIC profile instead")
	f.Int64Var(&linkGbps, "link-gbps", 100, "link rate without --cluster, Gb/s")
	f.DurationVar(&linkLat, "link-latency", time.Microsecond, "every link's propagation delay without --cluster")
	f.DurationVar(&switchLat, "switch-latency", 300*time.Nanosecond, "switch port-to-port latency without --cluster (0: the default, 300ns)")
	f.BoolVar(&lossless, "lossless", false, "without --cluster: unbounded switch buffers (no drops) and no DCQCN, as the lossless presets")
	f.IntVar(&ackEvery, "ack-every", 0, "ask for an ACK every N packets (1: every packet, as htsim; 0: the NIC's default)")
	f.Uint64Var(&seed, "seed", 1, "random seed")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	f.IntVar(&workers, "workers", runtime.GOMAXPROCS(0), "goroutines running the parallel kernel's partitions (0: the sequential kernel)")
	f.IntVar(&parts, "partitions", 0, "partitions of the parallel kernel (0: one per node)")
	return cmd
}
