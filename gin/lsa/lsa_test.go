package lsa

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/fabric/nvlink"
	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/stretchr/testify/require"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata")

type logger struct {
	s *sim.Sim
	b *strings.Builder
}

func (l logger) Observe(e *mem.Effect) {
	fmt.Fprintf(l.b, "t=%v %s %s+%d len=%d by %s", e.At, e.Op, e.Region.Name(), e.Off, e.Len, e.Agent)
	if e.Op != mem.OpWrite && e.Op != mem.OpFill {
		fmt.Fprintf(l.b, " %d->%d", e.Old, e.New)
	}
	l.b.WriteString("\n")
}

// runCase runs one golden case: "R: cmd args | cmd args ..." per rank line.
func runCase(t *testing.T, nGPU int, lines []string) string {
	t.Helper()
	s := sim.New(sim.Config{Seed: 1})
	ms := mem.NewSystem(s)
	bus := pcie.NewTree(s, pcie.DefaultConfig())
	sw := bus.AddSwitch("sw0")
	nvl := nvlink.NewDomain(s, nvlink.DefaultConfig(), nGPU)
	var ranks []*gin.Rank
	for i := 0; i < nGPU; i++ {
		name := fmt.Sprintf("gpu%d", i)
		g := gpu.New(s, gpu.DefaultConfig(), name, 0, i, ms, bus, bus.AddDevice(name, sw), nvl)
		ranks = append(ranks, &gin.Rank{World: i, GPU: g, Host: bus.Host()})
	}
	comm, err := gin.NewComm(ranks, gin.CommConfig{Version: gin.V2_30})
	require.NoError(t, err)
	dc, err := comm.DevCommCreate(gin.Requirements{BarrierCount: 1, LSABarrierCount: 1})
	require.NoError(t, err)
	buf, err := comm.WindowRegister("buf", 1<<20, gin.WinDefault, false)
	require.NoError(t, err)
	flg, err := comm.WindowRegister("flag", 4096, gin.WinDefault, false)
	require.NoError(t, err)
	var b strings.Builder
	ms.SetObserver(logger{s, &b})
	for _, line := range lines {
		rs, prog, ok := strings.Cut(line, ":")
		require.True(t, ok, "line %q", line)
		rank, err := strconv.Atoi(strings.TrimSpace(rs))
		require.NoError(t, err)
		var cmds [][]string
		for _, c := range strings.Split(prog, "|") {
			cmds = append(cmds, strings.Fields(c))
		}
		num := func(s string) uint64 {
			v, err := strconv.ParseUint(s, 10, 64)
			require.NoError(t, err, "number %q", s)
			return v
		}
		ranks[rank].GPU.Launch("k", 32, func(tg *gpu.Group) {
			l := New(dc, tg, rank)
			for _, c := range cmds {
				switch c[0] {
				case "copy":
					l.Copy(int(num(c[1])), buf, num(c[2]), nil, sim.Bytes(num(c[3])))
				case "store":
					l.Store(int(num(c[1])), flg, num(c[2]), num(c[3]))
				case "release":
					l.StoreRelease(int(num(c[1])), flg, num(c[2]), num(c[3]))
				case "wait":
					l.WaitAcquire(flg, num(c[1]), num(c[2]), 64)
				case "barrier":
					l.Barrier(int(num(c[1]))).Sync(gin.OrderAcqRel)
				case "hybrid":
					NewSession(dc, tg, rank, 0, int(num(c[1]))).Sync(gin.OrderAcqRel, gin.FencePut)
				case "sleep":
					tg.Sleep(sim.Duration(num(c[1])) * sim.Nanosecond)
				default:
					panic("unknown command " + c[0])
				}
				fmt.Fprintf(&b, "t=%v rank %d done %s\n", tg.Now(), rank, strings.Join(c, " "))
			}
		})
	}
	if err := s.Run(); err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
	}
	if err := comm.CheckDeadlock(); err != nil {
		fmt.Fprintf(&b, "%v\n", err)
	}
	s.Shutdown()
	return b.String()
}

// TestGolden runs testdata/lsa.txt: cases of "name: ...", "gpus: N", rank
// lines, "----", then the exact expected log. Regenerate with -rewrite.
func TestGolden(t *testing.T) {
	const path = "testdata/lsa.txt"
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out strings.Builder
	for _, block := range strings.Split(string(data), "\n====\n") {
		head, want, _ := strings.Cut(block, "----\n")
		var name string
		gpus := 2
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(head), "\n") {
			switch {
			case strings.HasPrefix(l, "name:"):
				name = strings.TrimSpace(l[5:])
			case strings.HasPrefix(l, "gpus:"):
				gpus, _ = strconv.Atoi(strings.TrimSpace(l[5:]))
			case l == "" || strings.HasPrefix(l, "#"):
			default:
				lines = append(lines, l)
			}
		}
		got := runCase(t, gpus, lines)
		out.WriteString(strings.TrimRight(head, "\n") + "\n----\n" + got)
		if !*rewrite {
			require.Equal(t, want, got, "case %s", name)
		}
		out.WriteString("\n====\n")
	}
	if *rewrite {
		s := strings.TrimSuffix(out.String(), "\n====\n")
		require.NoError(t, os.WriteFile(path, []byte(s), 0o644))
	}
}

// Copies to a peer land before a release-stored flag behind them.
func TestReleaseOrdersData(t *testing.T) {
	got := runCase(t, 2, []string{"0: copy 1 0 262144 | release 1 0 1", "1: wait 0 1"})
	dataAt := strings.Index(got, "write buf/r1+0 len=262144")
	flagAt := strings.Index(got, "store flag/r1+0")
	require.True(t, dataAt >= 0 && flagAt > dataAt, got)
}

// A rank that never arrives is named in the deadlock report.
func TestBarrierDeadlock(t *testing.T) {
	got := runCase(t, 3, []string{"0: barrier 0", "1: barrier 0", "2: sleep 10"})
	require.Contains(t, got, `gin: deadlock at t=`)
	require.Contains(t, got, `rank 0 coop "k/t1" waits lsa barrier 1 inbox of lsa rank 2 >= 1`)
}

// LSA user errors are reported like GIN ones.
func TestLSAErrors(t *testing.T) {
	got := runCase(t, 2, []string{"0: store 2 0 1"})
	require.Contains(t, got, `error: gin: t=0s rank 0 coop "k" lsa_store: peer outside the team: LSA peer 2 of a team of 2 ranks`)
	got = runCase(t, 2, []string{"0: copy 1 1048000 4096"})
	require.Contains(t, got, `lsa_store: access outside the window: window "buf" [1048000,+4096) of 1048576 bytes`)
}
