package verbs

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	o := Options{Case: CaseAtomicLat, Sizes: []int64{4096}}
	require.NoError(t, o.Check())
	assert.Equal(t, []int64{8}, o.Sizes, "atomics move 8 bytes")
	assert.Equal(t, 1000, o.Iters)
	assert.Equal(t, 1, o.Port)
	assert.Equal(t, "loopback", o.Placement())
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Case: "send_lat", Sizes: []int64{8}}, "send_lat"},
		{Options{Case: CaseWriteLat}, "no sizes"},
		{Options{Case: CaseWriteLat, Sizes: []int64{0}}, "size 0"},
		{Options{Case: CaseWriteBW, Sizes: []int64{8}, TxDepth: -1}, "tx depth"},
		{Options{Case: CaseWriteLat, Sizes: []int64{8}, Server: ":1", Connect: "h:1"}, "exclude"},
		{Options{Case: CaseWriteLat, Sizes: []int64{8}, GIDIndex: 300}, "gid index"},
	} {
		assert.ErrorContains(t, c.o.Check(), c.want)
	}
}

func TestLatencyRow(t *testing.T) {
	ns := make([]float64, 100)
	for i := range ns {
		ns[i] = float64(1000 + 10*i) // 1.00 .. 1.99 us
	}
	r := latencyRow(CaseWriteLat, 8, ns)
	assert.Equal(t, 100, r.Iters)
	assert.InDelta(t, 1.495, r.AvgUs, 1e-9)
	assert.InDelta(t, 1.0, r.MinUs, 1e-9)
	assert.InDelta(t, 1.49, r.MedianUs, 1e-9)
	assert.InDelta(t, 1.98, r.P99Us, 1e-9)
	assert.InDelta(t, 1.99, r.MaxUs, 1e-9)
	assert.InDelta(t, 8/1495.0, r.BandwidthGBps, 1e-12)
	b := bandwidthRow(1<<20, 1000, 25e6) // 1 GiB... 1000 MiB in 25 ms
	assert.InDelta(t, 41.94304, b.BandwidthGBps, 1e-9)
	assert.InDelta(t, 25.0, b.AvgUs, 1e-9)
}

// Without the hardware half (the default build), Run says how to get it;
// with it, on a machine without an RDMA device (CI), it says that.
func TestRunWithoutHardware(t *testing.T) {
	_, err := Run(Options{Case: CaseWriteLat, Sizes: []int64{8}, Iters: 10})
	if err == nil {
		t.Skip("an RDMA device is present: the hardware run succeeded")
	}
	if Built {
		assert.ErrorIs(t, err, ErrNoDevice)
	} else {
		assert.ErrorIs(t, err, ErrNotBuilt)
	}
}

// On a machine with an RDMA device and a binary built with -tags verbs,
// every case runs in loopback and gives sane figures; elsewhere the test
// skips with the reason Run gives.
func TestLoopbackCases(t *testing.T) {
	for _, c := range Cases {
		rows, err := Run(Options{Case: c, Sizes: []int64{8, 65536}, Iters: 200})
		if errors.Is(err, ErrNotBuilt) || errors.Is(err, ErrNoDevice) {
			t.Skipf("no hardware run: %v", err)
		}
		require.NoError(t, err, "%s on the RDMA device", c)
		require.NotEmpty(t, rows, c)
		for _, r := range rows {
			assert.Equal(t, c, r.Case)
			assert.Equal(t, 200, r.Iters)
			assert.Greater(t, r.AvgUs, 0.0, "%s %d B", c, r.Bytes)
			assert.Greater(t, r.BandwidthGBps, 0.0, "%s %d B", c, r.Bytes)
			if c != CaseWriteBW {
				assert.LessOrEqual(t, r.MinUs, r.MedianUs)
				assert.LessOrEqual(t, r.MedianUs, r.MaxUs)
			}
		}
	}
}
