// Package prog is the serialisable form of GIN device programs: one
// Program per (rank, thread group), a flat list of op-level instructions
// (put, put_value, signal, get, flush, flush_async, wait, wait_signal,
// wait_counter, read/reset of signals and counters, read/wait of VA
// signals, barrier, sleep, compute, lsa_store, and read: a device load of
// this rank's window bytes, kept in the results for checking payloads and
// judged by the semantic checker gin/check) in versioned JSON. It is
// deliberately small and
// explicit, with no expressions or loops, so that a GPU-side interpreter on
// real hardware can execute the same file.
//
// Decode validates a file strictly (unknown fields, missing or misplaced
// fields, bad enum values) and names the program, the op index and the
// field in its errors. Launch runs a program through the gin Go API on the
// simulator (LaunchResults also keeps what every op returned); Recorder (a
// gin.Hook) turns Go-API code into the program it executed (read is a
// device load, not a GIN call, and is not recorded).
package prog
