package check

import (
	"math/rand/v2"
	"testing"

	"github.com/ginsim/ginsim/sim/obs"
	"github.com/stretchr/testify/require"
)

// TestOpTable drives the op window like the checker does (ids issued
// mostly in order, some late; ops retired in any order) and compares it
// with a map after every step.
func TestOpTable(t *testing.T) {
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 1))
		var tab opTable
		ref := map[obs.OpID]*op{}
		next := obs.OpID(1)
		var late []obs.OpID // ids handed out but issued later
		for range 800 {
			switch k := r.IntN(10); {
			case k < 4: // issue the next id, or hold it back
				id := next
				next++
				if r.IntN(8) == 0 {
					late = append(late, id)
					continue
				}
				o := &op{id: id}
				tab.put(o)
				ref[id] = o
			case k < 5 && len(late) > 0: // a held-back id is issued
				i := r.IntN(len(late))
				id := late[i]
				late = append(late[:i], late[i+1:]...)
				o := &op{id: id}
				tab.put(o)
				ref[id] = o
			default: // retire a live op; the oldest ones more often
				if len(ref) == 0 {
					continue
				}
				var ids []obs.OpID
				for _, o := range tab.all() {
					if o != nil {
						ids = append(ids, o.id)
					}
				}
				id := ids[min(r.IntN(len(ids)), r.IntN(len(ids)))]
				tab.remove(id)
				delete(ref, id)
			}
			require.Equal(t, len(ref), tab.n)
			for id := obs.OpID(0); id < next+2; id++ {
				require.Same(t, ref[id], tab.get(id), "seed %d id %d", seed, id)
			}
			live := 0
			for i, o := range tab.all() {
				if o != nil {
					live++
					require.Equal(t, tab.base+obs.OpID(i), o.id)
				}
			}
			require.Equal(t, len(ref), live)
			if len(ref) > 0 {
				require.NotNil(t, tab.all()[0], "the window starts at a live op")
			}
		}
	}
}

// TestFIFO: push and pop keep the order while the storage is reused.
func TestFIFO(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var q fifo[int]
	var ref []int
	for i := range 5000 {
		if r.IntN(3) > 0 || len(ref) == 0 {
			q.push(i)
			ref = append(ref, i)
		} else {
			q.pop()
			ref = ref[1:]
		}
		require.Equal(t, len(ref), q.len())
		if len(ref) > 0 {
			require.Equal(t, ref[0], q.items()[0])
			require.Equal(t, ref[len(ref)-1], q.items()[q.len()-1])
		}
	}
	require.Equal(t, ref, q.items())
	require.LessOrEqual(t, cap(q.s), 4*max(q.len(), 16), "storage is reused, not leaked")
}
