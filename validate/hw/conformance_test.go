package hw

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConformanceCasesLower: every test the device can run lowers in
// verify's layout (window size, fill line, reads and local stores), and
// each skipped test says why.
func TestConformanceCasesLower(t *testing.T) {
	run := 0
	for _, cc := range Conformance() {
		if cc.Skip != "" {
			if cc.Case.File != nil { // skipped by the lowering itself
				_, err := SetupIn(cc.Case.File, ConfLayout)
				assert.ErrorContains(t, err, strings.TrimPrefix(cc.Skip, "hw: "), cc.Test.Name)
			}
			continue
		}
		run++
		ops, _, err := LowerIn(cc.Case.File, ConfLayout)
		require.NoError(t, err, cc.Test.Name)
		assert.Contains(t, string(ops), "ginhw-ops 1\nfill verify\n", cc.Test.Name)
		if strings.Contains(string(ops), " buf\n") {
			assert.Contains(t, string(ops), "win 0 4194304 buf\n", cc.Test.Name)
		}
		_, _, err = Lower(cc.Case.File) // the --program layout has neither reads nor 4 MiB windows
		if strings.Contains(string(ops), "op read ") || strings.Contains(string(ops), "op lsa_store ") {
			var ue *UnsupportedError
			assert.True(t, errors.As(err, &ue), cc.Test.Name)
		}
	}
	assert.Equal(t, 15, run)
}

// TestCommittedConformance pins the verdicts of the committed H200 run of
// the conformance suite: each test judged by its own rules on NCCL 2.28.9
// through ginsim's plugin and on the model (schedule 0).
func TestCommittedConformance(t *testing.T) {
	fsys, err := Measured(ConfRun)
	require.NoError(t, err)
	want := map[string][3]string{ // device, model, agree
		"put-signal-payload":         {"yes", "yes", "yes"},
		"signal-covers-earlier-puts": {"yes", "yes", "yes"},
		"put-value-size":             {"no", "yes", "no"}, // NCCL 2.28.9 drops a proxy putValue's signal
		"signal-exactly-once":        {"yes", "yes", "yes"},
		"counter-local-completion":   {"yes", "yes", "yes"},
		"counter-exactly-once":       {"yes", "yes", "yes"},
		"flush-local-completion":     {"yes", "yes", "yes"},
		"barrier-sync":               {"yes", "yes", "yes"},
		"wait-signal-least":          {"yes", "yes", "yes"},
		"wait-rolling-wrap":          {"yes", "yes", "yes"},
		"reset-then-wait":            {"yes", "yes", "yes"},
		"loopback-put-signal":        {"yes", "yes", "yes"},
		"put-after-store":            {"yes", "yes", "yes"},
		"rule-inc-add-mix":           {"not reported", "reported", "-"},
		"rule-reset-race":            {"not reported", "reported", "-"},
	}
	seen := 0
	for _, cc := range Conformance() {
		var dev *Device
		if cc.Skip == "" {
			dev, err = LoadDevice(fsys, cc.Case.Name, "zero")
			require.NoError(t, err, cc.Test.Name)
		}
		v, err := JudgeConf(cc, dev)
		require.NoError(t, err, cc.Test.Name)
		w, ok := want[cc.Test.Name]
		if !ok {
			assert.Equal(t, "not run", v.Device, cc.Test.Name)
			continue
		}
		seen++
		assert.Equal(t, w, [3]string{v.Device, v.Model, v.Agree}, "%s: %s / %s", cc.Test.Name, v.DeviceWhy, v.ModelWhy)
	}
	assert.Equal(t, len(want), seen)
	if _, err := fs.Stat(fsys, "put-value-size.zero.r1.txt.reads.gz"); err != nil {
		t.Fatal(err)
	}
}

// TestConfReadsJudged: a read's bytes decide a guarantee: the committed
// payload judged as is passes, and with one byte changed fails.
func TestConfReadsJudged(t *testing.T) {
	fsys, err := Measured(ConfRun)
	require.NoError(t, err)
	var cc ConfCase
	for _, c := range Conformance() {
		if c.Test.Name == "put-signal-payload" {
			cc = c
		}
	}
	dev, err := LoadDevice(fsys, cc.Case.Name, "zero")
	require.NoError(t, err)
	require.Len(t, dev.Reads[1], 256<<10)
	v, err := JudgeConf(cc, dev)
	require.NoError(t, err)
	assert.Equal(t, "yes", v.Device)
	dev.Reads[1] = append([]byte(nil), dev.Reads[1]...)
	dev.Reads[1][1000] ^= 1
	v, err = JudgeConf(cc, dev)
	require.NoError(t, err)
	assert.Equal(t, "no", v.Device)
	assert.Contains(t, v.DeviceWhy, "byte 1000")
}
