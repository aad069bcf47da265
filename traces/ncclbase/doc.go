// Package ncclbase is the host-initiated baseline: Megatron's all-to-all-v
// of every selection over NCCL (counts all-gather, host sync, then
// all_to_all_single for dispatch and its reverse for combine), with a model
// of NCCL's point-to-point transports under it: the P2P transport over
// NVLink, the NET transport's proxy thread with its CTS FIFO, PXN and
// shared connections, and the LL protocol.
package ncclbase
