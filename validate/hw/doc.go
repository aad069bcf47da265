// Package hw runs GIN programs (gin/prog files) on real NCCL and on the
// model, and compares them: `ginsim validate gin`.
//
// # The device half
//
// native/ holds what runs on the GPU machine; native/build.sh builds it
// there against the nvidia-nccl-cu13 wheel's NCCL 2.28.9 (no cgo, so the
// default build and `go test ./...` need no CUDA):
//
//   - ginhw.c, libnccl-net-ginhw.so: ginsim's NCCL plugin. A host-type NET
//     stub (NCCL takes GIN only from the NET plugin it assigns to the
//     communicator) and a proxy-type GIN plugin, ncclGinPlugin_v11, whose
//     network is emulated between the ranks' processes: per collComm a
//     shared-memory segment (exchanged through the listen/connect handles)
//     with a ring of message slots per ordered rank pair. A put is carried
//     as a NIC's two DMAs would carry it: the sender's plugin copies the
//     source GPU -> slot on a non-blocking stream and publishes the slot
//     when the copy is done; the target's own plugin instance, on NCCL's
//     progress thread, copies slot -> its registered GPU memory and then,
//     on the same stream and so strictly after the data, adds the signal
//     with a one-thread atomic kernel, and acknowledges. test() reports a
//     request done at the acknowledgement (remote completion, as an IB CQE
//     after the ACK); NCCL then bumps the counter and advances flush.
//     iput never waits: a full ring leaves the request queued for the
//     progress calls. The CUDA driver is dlopen'ed at run time; every call
//     is checked; every wait is bounded (GINHW_TIMEOUT_S) with a message;
//     bad input (unknown handles, sizes outside a registration, a rank out
//     of range, a dead peer) is an error naming what was wrong, and sticks
//     so that NCCL's async error reports it.
//   - ginexec.cu: runs one rank of a program lowered by Lower through
//     NCCL's device API (put, put_value, signal, flush, signal and counter
//     read/wait/reset, rail GIN barriers, sleep) in a one-thread kernel and
//     records each op's status, value and %globaltimer stamps, then the
//     final signals, counters and window checksums (FNV-1a). For the
//     conformance cases ("fill verify") it fills windows with
//     verify.Pattern, runs read (the window's bytes, copied on the GPU
//     into RESULT.reads) and lsa_store (a store into the rank's own
//     window); its waits compare as NCCL's rollingLessEq does.
//   - ginhw_test.c: the plugin's bad-input checks (no GPU needed).
//   - run.sh: builds the three and runs every case on two processes of GPU
//     0 (NCCL_HOSTID=hostA/hostB, so NCCL sees two hosts and routes every
//     put through GIN), once per emulated fabric, plus NCCL's default four
//     GIN contexts and a peer killed mid-run. On the GPU machine,
//     `ginsim validate gin --exec BIN` (Exec) does the same per program
//     from the Go side and compares at once.
//
// Why C rather than Go's c-shared mode: the plugin lives inside NCCL's
// process and NCCL calls ginProgress millions of times a second from its
// progress thread; a Go runtime there would add its own threads, signal
// handlers and a cgo transition on every call, and it would still need a
// C shim for the ABI tables. The C file is one self-contained unit built
// with gcc where the GPU is.
//
// Why staged copies rather than CUDA IPC: NCCL 2.28.9 allocates windows
// with cuMem (VMM), which CUDA IPC handles cannot export; sharing them
// needs POSIX file descriptors passed between the processes. Staging
// through shared host memory needs neither, keeps the target's plugin the
// only writer of its memory (as the target NIC is), and gives the
// emulated link a natural place to delay messages.
//
// # The emulated fabric
//
// GINHW_FABRIC="model:SOCKET" times every message with the model's NICs
// and network instead, in real time: `ginsim validate fabric-serve`
// (package netemu) listens on the unix datagram socket SOCKET and runs the
// cluster's models for the ranks (one node, NIC and RC QP pair each). The
// sender's plugin sends a fixed-size request for each ring message at
// iput (never waiting: a full socket queue leaves it for the next progress
// call) stamped with the iput's instant, publishes the slot "pending", and
// its progress calls read the replies and store the model's delivery
// instant into the slot; the target delivers at that instant, or when the
// reply reaches the slot if that is later. A put to oneself is not timed.
// A dead server is an error naming the socket (at connect, on a send, or
// after GINHW_TIMEOUT_S without a reply). The plugin's trace records each
// reply ("fab": the model's instant and the reply's arrival), which
// Device.ModelFabric lines up with the target's deliveries.
//
// GINHW_FABRIC="lat_ns=N,gbps=G,name=S" delays every message by the link
// from rank 0 to rank 1 of a ginsim cluster (FabricOf: cables and switches
// between GPU 0 of two nodes, at the NIC port rate), serialising the
// messages of one sender; "zero" adds nothing. What it cannot reproduce:
// the NIC pipelines, PCIe crossings and IB transport of the model (on the
// device those steps are host memory copies, ~20 us for a small put, which
// dominate), congestion from other traffic, loss and retransmission, more
// than one link per rank, and anything faster than the staging copies.
// Two processes on one GPU also time-slice it (about 2.2 ms a slice on the
// H200), so a cross-process round trip measures the slice, not the
// network; timings within one process (the GPU's descriptor writes, the
// proxy's pickup, a self put) are unaffected.
//
// # The Go half
//
// Lower turns a program file into the executor's op list and says which
// ops the device cannot run (UnsupportedError). ParseResult and ParseTrace
// read the executor's and the plugin's output. Model runs the same
// programs on the model's proxy backend (two ranks on two nodes of a
// cluster, windows filled as the executor fills them). Compare lists the
// disagreements (op statuses and read values, final signals, counters,
// window contents) and Timings the timings real on both.
//
// # The conformance suite
//
// Conformance takes gin/verify's tests for the proxy backend under NCCL
// 2.28 and keeps those the harness can run (two ranks, one program each,
// context 0, rail GIN barriers; each other test with its reason); they are
// lowered in verify's layout (ConfLayout: its 4 MiB window and pattern).
// Device.VerifyOutcome turns a device run into a verify.Outcome (op values,
// the bytes of reads, the first op that did not return), and JudgeConf
// applies the test's own rules to it and to the model's run (verify's
// schedule 0): a guarantee must be allowed, a non-guarantee may or may not
// show its surprise, and a usage rule, which NCCL does not check, is
// reported with what NCCL did.
package hw
