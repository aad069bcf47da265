// Package lsa is the load/store-accessible (LSA) side of the NCCL Device
// API on simulated GPUs: stores and copies over NVLink into the windows of
// the other ranks of the LSA team (ncclGetLsaPointer-style access), release
// stores and acquire waits on flags, the LSA barrier (unicast inbox epochs,
// spec 4.2) and the hybrid barrier (ncclBarrierSession, spec 4.3) that
// combines it with a GIN barrier of package gin.
package lsa
