// Package v2 is DeepEP V2 (ElasticBuffer) dispatch and combine as GIN
// device programs. Direct mode (dispatch.cuh, combine.cuh) puts each token
// record once per distinct destination rank and ends with a completion
// barrier; hybrid mode (hybrid_dispatch.cuh, hybrid_combine.cuh) puts one
// record per (token, remote node) to the rail peer with aggregated
// requests and forwards it inside the node over NVLink.
//
// Each warp is written once. The hot ones (direct_warps.go,
// hybrid_warps.go) are state machines on groups without a process, driven
// by gpu's Then operations as every process-free device program is (see
// warp.go); they need a GIN backend that issues for such groups
// (gin.ThenBackend), and Setup refuses any other. The barrier groups,
// notify warps and flush warps run on processes. testdata/golden.txt pins
// the reports and timelines they produce (TestV2Golden).
package v2
