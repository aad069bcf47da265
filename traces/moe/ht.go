package moe

func newHT(*env) workload { return pendingWorkload{"DeepEP high-throughput mode (--mode ht)"} }
