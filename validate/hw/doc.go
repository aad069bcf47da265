// Package hw runs GIN programs (gin/prog files) on real NCCL and on the
// model, and compares them: `ginsim validate gin`.
//
// The device half lives in native/ and is built on the GPU machine by
// native/build.sh (no cgo, so `go test ./...` needs no CUDA):
//
//   - ginhw.c is ginsim's NCCL 2.28.9 plugin, libnccl-net-ginhw.so: a
//     host-type NET stub plus a proxy-type GIN plugin (ncclGinPlugin_v11)
//     whose network is emulated in shared memory between the ranks'
//     processes, with an optional emulated link delay (GINHW_FABRIC).
//   - ginexec.cu runs one rank of a lowered program through NCCL's device
//     API and records each op's outcome and %globaltimer stamps.
//   - ginhw_test.c feeds the plugin bad input (unknown handles, sizes
//     outside a registration, a dead peer) and checks the errors.
//   - run.sh builds all three and runs every lowered case on two processes
//     of one GPU (NCCL_HOSTID=hostA/hostB).
//
// This package lowers programs to the executor's op list (Lower), parses
// its result files (ParseResult), runs the same programs on the model's
// proxy backend (Model) and lines the two up (Compare).
package hw
