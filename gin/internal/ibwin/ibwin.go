package ibwin

import (
	"fmt"
	"slices"

	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/nic"
	"github.com/ginsim/ginsim/sim/mem"
)

// Access rights of the memory registrations.
const (
	// WinAccess is granted on a window's region: it is the source and
	// target of puts and gets and the target of remote atomics.
	WinAccess = nic.AccessLocalWrite | nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic
	// SigAccess is granted on signal and counter words: remote atomics and
	// writes land there.
	SigAccess = nic.AccessLocalWrite | nic.AccessRemoteAtomic | nic.AccessRemoteWrite
)

// VA gives every region a distinct, page-aligned virtual address (the
// model's stand-in for cuMem VAs; only uniqueness matters).
func VA(r *mem.Region) uint64 { return uint64(r.ID()+1) << 40 }

// Rank is what Register needs of one rank and one of its NICs: the NIC,
// the PCIe device that owns the window memory (the GPU), and the table of
// the rank's window MRs on that NIC, indexed by window ID.
type Rank struct {
	NIC *nic.NIC
	Dev pcie.DevID
	MRs *[]*nic.MR
}

// Register registers every rank's region of w with that rank's NICs (the
// rkeys are what ncclCommWindowRegister all-gathers), growing each MR table
// to hold w's ID and skipping tables where w is already registered.
// ranks(r) describes rank r for r in [0, n): one Rank per NIC it uses.
// Errors carry the prefix pkg (the calling backend's package name).
func Register(pkg string, w *gin.Window, n int, ranks func(r int) []Rank) error {
	for r := range n {
		for _, rk := range ranks(r) {
			mrs := rk.MRs
			for len(*mrs) <= w.ID() {
				*mrs = append(*mrs, nil)
			}
			if (*mrs)[w.ID()] != nil {
				continue
			}
			reg := w.Region(r)
			mr, err := rk.NIC.RegMR(reg, 0, uint64(reg.Size()), VA(reg), WinAccess, rk.Dev,
				w.Flags()&gin.WinStrictOrdering != 0)
			if err != nil {
				return fmt.Errorf("%s: window %s on rank %d: %w", pkg, w.Name(), r, err)
			}
			(*mrs)[w.ID()] = mr
		}
	}
	return nil
}

// Connections maps a rank's GIN connections to its NICs as NCCL does:
// connection n uses local NIC n modulo the rank's NICs
// (localGinDevs[n % nLocalGinDevs]). It returns each NIC used once, in
// order, and per connection the index of its NIC in that list.
func Connections(local []*nic.NIC, nconn int) (nics []*nic.NIC, slot []int) {
	for n := range nconn {
		x := local[n%len(local)]
		k := slices.Index(nics, x)
		if k < 0 {
			k = len(nics)
			nics = append(nics, x)
		}
		slot = append(slot, k)
	}
	return nics, slot
}
