package gin

import "fmt"

// Version is the NCCL version whose GIN behaviour a communicator follows.
type Version int

// Supported versions.
const (
	V2_28 Version = 228 // first GIN release (2.28.7/2.28.9)
	V2_30 Version = 230 // 2.30.5+ (get, flushAsync, VA and weak signals, per-peer barriers)
)

func (v Version) String() string {
	switch v {
	case V2_28:
		return "2.28"
	case V2_30:
		return "2.30"
	}
	return fmt.Sprintf("version(%d)", int(v))
}

// Profile is the set of behaviours that differ between versions.
type Profile struct {
	Version Version
	// GFDSize is the proxy descriptor size in bytes: 64 (2.28), 128 (2.30).
	GFDSize int
	// HasGet, HasFlushAsync: get and flushAsync/wait exist (2.30.3+).
	HasGet, HasFlushAsync bool
	// HasVASignals, HasWeakSignals, HasOptFlags, HasSharingModes: 2.29.7+
	// and 2.30.3/2.30.5 features.
	HasVASignals, HasWeakSignals, HasOptFlags, HasSharingModes bool
	// SignalResetByOffset: the proxy (backend v2) resets a signal by
	// recording an offset instead of storing 0 (2.30.5).
	SignalResetByOffset bool
	// SwapScopes: 2.28 passes (alreadyReleased, expected_scope) to the
	// implementation as (requiredRelease, givenRelease) (spec 2.5).
	SwapScopes bool
	// BarrierPerPeerSlots: the GIN barrier uses one signal per peer slot
	// and fence levels (2.30); otherwise one signal per barrier and an
	// epoch (2.28).
	BarrierPerPeerSlots bool
	// WaitCounter64: waitCounter compares 64-bit values regardless of bits
	// (2.28 quirk, spec 2.5).
	WaitCounter64 bool
	// HasConnectionType: ginConnectionType exists (2.29.7+); 2.28 connects
	// GIN whenever the comm spans nodes or asks for signals/counters.
	HasConnectionType bool
	// HasBarrierFences, HasAllContexts, HasQueueDepth: GIN barrier fence
	// levels beyond Relaxed, ncclGinAllContexts and ginQueueDepth (2.30;
	// gin_barrier.h@228 L17-33 has none of them).
	HasBarrierFences, HasAllContexts, HasQueueDepth bool
	// HybridBarrierSets: the hybrid barrier has its own LSA, rail and world
	// GIN barrier sets, separate from the user's (2.30,
	// dev_runtime.cc@230 L1194-1217); 2.28 shares them and sizes each as
	// max(barrierCount, xCount) (dev_runtime.cc@228 L771-777).
	HybridBarrierSets bool
	// FollowShadowStores: waitSignalFollowShadow stores the value seen
	// into the shadow (2.29.2+; gin__funcs.h@228 L368-389 does not).
	FollowShadowStores bool
}

// ProfileOf returns the profile of version v.
func ProfileOf(v Version) (Profile, error) {
	switch v {
	case V2_28:
		return Profile{Version: v, GFDSize: 64, SwapScopes: true, WaitCounter64: true}, nil
	case V2_30:
		return Profile{Version: v, GFDSize: 128, HasGet: true, HasFlushAsync: true, HasVASignals: true,
			HasWeakSignals: true, HasOptFlags: true, HasSharingModes: true, SignalResetByOffset: true,
			BarrierPerPeerSlots: true, HasConnectionType: true, HasBarrierFences: true, HasAllContexts: true,
			HasQueueDepth: true, HybridBarrierSets: true, FollowShadowStores: true}, nil
	}
	return Profile{}, fmt.Errorf("gin: unsupported version %v (want 2.28 or 2.30)", v)
}
