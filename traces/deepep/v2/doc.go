// Package v2 is DeepEP V2 (ElasticBuffer) dispatch and combine as GIN
// device programs. Direct mode (dispatch.cuh, combine.cuh) puts each token
// record once per distinct destination rank and ends with a completion
// barrier; hybrid mode (hybrid_dispatch.cuh, hybrid_combine.cuh) puts one
// record per (token, remote node) to the rail peer with aggregated
// requests and forwards it inside the node over NVLink.
//
// The hot warps exist twice: as processes (the reference, Config.NoThen)
// and as Then state machines (then.go).
package v2
