package ht

import "github.com/ginsim/ginsim/traces/workload"

// Accessors for the external tests (ht_test), which run the workload
// through replay.

func (w *Workload) Env() *workload.Env        { return w.e }
func (w *Workload) Rank(node, local int) int  { return w.rank(node, local) }
func (w *Workload) SeqOf(r, c, n int) []int32 { return w.seqOf(r, c, n) }
func (w *Workload) RecC() uint64              { return w.recC }
