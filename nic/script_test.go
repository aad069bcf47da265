package nic

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

var rewrite = flag.Bool("rewrite", false, "rewrite golden files in testdata")

// TestScripts runs the golden scripts in testdata/*.txt. Each file is a list
// of commands, a line "----", and the exact log they produce: one line per
// packet sent, memory effect and CQE, with times. Regenerate with
// `go test ./nic -run TestScripts -rewrite` and review the diff.
//
// Commands (one per line, # comments):
//
//	config mtu=1024 timeout=14 retry=7 rnr=7 minrnr=1   (first; sets up the two nodes)
//	mr NAME node=N len=L access=lw,rw,rr,ra [host] [fill=B]
//	post node=N op=write|write_imm|send|send_imm|read|fadd|cswap|nop id=I
//	     [src=MR soff=O] len=L [dst=MR doff=O] [add=V cmp=V swap=V imm=V inline=V] [unsignaled] [rkey=K]
//	recv node=N id=I mr=MR off=O len=L
//	drop from=N nth=K[,K...] | drop from=N all     (drop packets sent by node N, counted from 1)
//	mark from=N nth=K[,K...]                       (mark those packets CE on arrival, as a congested switch would)
//	run [for=Nus]                                  (run to quiescence, or for N microseconds)
//	dump MR off len                                (hex of memory)
//	state                                          (QP states and counters)
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			cmds, want, _ := strings.Cut(string(raw), "----\n")
			got := runScript(t, cmds)
			if *rewrite {
				if err := os.WriteFile(f, []byte(cmds+"----\n"+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != want {
				t.Errorf("%s: log differs (rerun with -rewrite and review the diff)\n--- got\n%s\n--- want\n%s", f, got, want)
			}
		})
	}
}

func kv(fields []string) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}

func num(t *testing.T, m map[string]string, k string, def uint64) uint64 {
	v, ok := m[k]
	if !ok {
		return def
	}
	x, err := strconv.ParseUint(v, 0, 64)
	if err != nil {
		t.Fatalf("bad %s=%q: %v", k, v, err)
	}
	return x
}

func runScript(t *testing.T, cmds string) string {
	var r *rig
	drops := [2]map[int]bool{{}, {}}
	marks := [2]map[int]bool{{}, {}}
	dropAll := [2]bool{}
	seen := [2]int{}
	sc := bufio.NewScanner(strings.NewReader(cmds))
	var out strings.Builder
	flushLog := func() {
		out.WriteString(r.log.String())
		r.log.Reset()
	}
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		m := kv(f[1:])
		if r == nil && f[0] != "config" {
			r = newRig(1, rigOpts{mtu: 1024, timeout: 14, retry: 7, rnrRetry: 7, minRNR: 1})
			r.trace()
		}
		switch f[0] {
		case "config":
			r = newRig(1, rigOpts{mtu: int(num(t, m, "mtu", 1024)), timeout: uint8(num(t, m, "timeout", 14)),
				retry: uint8(num(t, m, "retry", 7)), rnrRetry: uint8(num(t, m, "rnr", 7)), minRNR: uint8(num(t, m, "minrnr", 1))})
			r.trace()
		case "mr":
			node := int(num(t, m, "node", 0))
			ln := num(t, m, "len", 4096)
			var acc Access
			for _, a := range strings.Split(m["access"], ",") {
				acc |= map[string]Access{"lw": AccessLocalWrite, "rw": AccessRemoteWrite, "rr": AccessRemoteRead, "ra": AccessRemoteAtomic, "": 0}[a]
			}
			loc, where := mem.Loc{Node: node, Kind: mem.HBM}, r.gpu[node]
			if _, ok := m["host"]; ok {
				loc, where = mem.Loc{Node: node, Kind: mem.Host}, r.bus[node].Host()
			}
			reg := r.ms.Alloc(f[1], loc, sim_Bytes(ln), true)
			if fill := num(t, m, "fill", 0); fill != 0 {
				for i := range reg.Bytes() {
					reg.Bytes()[i] = byte(fill) + byte(i)
				}
			}
			mr, err := r.nic[node].RegMR(reg, 0, ln, 0x10000*uint64(len(r.mrs)+1), acc, where, true)
			if err != nil {
				t.Fatal(err)
			}
			r.mrs[f[1]] = mr
		case "post":
			node := int(num(t, m, "node", 0))
			wr := WR{ID: num(t, m, "id", 0), Signaled: true, Local: SGE{Len: num(t, m, "len", 0)}}
			if _, ok := m["unsignaled"]; ok {
				wr.Signaled = false
			}
			if _, ok := m["fence"]; ok {
				wr.Fence = true
			}
			ops := map[string]WROpcode{"write": WRWrite, "write_imm": WRWriteImm, "send": WRSend, "send_imm": WRSendImm,
				"read": WRRead, "fadd": WRFetchAdd, "cswap": WRCmpSwap, "nop": WRNop}
			op, ok := ops[m["op"]]
			if !ok {
				t.Fatalf("bad op %q", m["op"])
			}
			wr.Op = op
			if s, ok := m["src"]; ok {
				wr.Local.MR, wr.Local.Off = r.mrs[s], num(t, m, "soff", 0)
			}
			if v, ok := m["inline"]; ok {
				wr.Inline = true
				wr.InlineData, _ = strconv.ParseUint(v, 0, 64)
			}
			if d, ok := m["dst"]; ok {
				mr := r.mrs[d]
				wr.RemoteVA, wr.RKey = mr.VA+num(t, m, "doff", 0), mr.RKey
			}
			wr.RKey = uint32(num(t, m, "rkey", uint64(wr.RKey)))
			wr.CompareAdd = num(t, m, "add", num(t, m, "cmp", 0))
			wr.Swap = num(t, m, "swap", 0)
			wr.Imm = uint32(num(t, m, "imm", 0))
			if err := r.qp[node].PostSend([]WR{wr}); err != nil {
				fmt.Fprintf(&out, "post error: %v\n", err)
			}
		case "recv":
			node := int(num(t, m, "node", 0))
			err := r.qp[node].PostRecv(RecvWR{ID: num(t, m, "id", 0), Local: SGE{MR: r.mrs[m["mr"]], Off: num(t, m, "off", 0), Len: num(t, m, "len", 0)}})
			if err != nil {
				fmt.Fprintf(&out, "recv error: %v\n", err)
			}
		case "drop", "mark":
			from := int(num(t, m, "from", 0))
			if _, ok := m["all"]; ok && f[0] == "drop" {
				dropAll[from] = true
			}
			if s, ok := m["nth"]; ok {
				for _, x := range strings.Split(s, ",") {
					k, _ := strconv.Atoi(x)
					if f[0] == "drop" {
						drops[from][k] = true
					} else {
						marks[from][k] = true
					}
				}
			}
			for i := range 2 {
				to := r.nic[i]
				from := 1 - i
				to.rxHook = func(p *fabric.Packet) bool {
					seen[from]++
					if dropAll[from] || drops[from][seen[from]] {
						r.logf("%s drops %s (lost)", to.name, pktString(p))
						r.net.Free(p)
						return false
					}
					if marks[from][seen[from]] {
						p.ECN = 3
						r.logf("%s gets %s (CE)", to.name, pktString(p))
					}
					return true
				}
			}
		case "run":
			limit := sim.MaxTime
			if v, ok := m["for"]; ok {
				d, err := strconv.ParseUint(strings.TrimSuffix(v, "us"), 10, 64)
				if err != nil {
					t.Fatalf("bad for=%q", v)
				}
				limit = r.s.Now().Add(sim.Duration(d) * sim.Microsecond)
			}
			if err := r.s.RunUntil(limit); err != nil {
				t.Fatal(err)
			}
			flushLog()
		case "dump":
			mr := r.mrs[f[1]]
			off, _ := strconv.ParseUint(f[2], 0, 64)
			n, _ := strconv.ParseUint(f[3], 0, 64)
			b := make([]byte, n)
			mr.Region.Read(mr.Off+off, b)
			fmt.Fprintf(&out, "dump %s [%d,+%d) %s\n", f[1], off, n, hex.EncodeToString(b))
		case "state":
			for i, qp := range r.qp {
				fmt.Fprintf(&out, "qp%d %v completed=%d posted=%d cq landed=%d\n", i, qp.State(), qp.SQCompleted(), qp.SQPosted(), r.cq[i].Landed())
			}
		default:
			t.Fatalf("unknown command %q", f[0])
		}
	}
	return out.String()
}

// TestScriptDeterminism runs a lossy script twice and expects identical logs.
func TestScriptDeterminism(t *testing.T) {
	raw, err := os.ReadFile("testdata/loss_nak.txt")
	if err != nil {
		t.Fatal(err)
	}
	cmds, _, _ := strings.Cut(string(raw), "----\n")
	if a, b := runScript(t, cmds), runScript(t, cmds); a != b || a == "" {
		t.Errorf("two runs differ:\n%s\n---\n%s", a, b)
	}
}
