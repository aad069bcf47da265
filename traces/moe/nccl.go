package moe

func newNCCL(*env) workload {
	return pendingWorkload{"the host-initiated NCCL baseline (--backend nccl)"}
}
