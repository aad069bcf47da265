// Package prog is the serialisable form of GIN device programs: one
// Program per (rank, thread group), a flat list of op-level instructions
// (put, put_value, signal, get, flush, flush_async, wait, wait_signal,
// wait_counter, read/reset of signals and counters, read_window, barrier,
// sleep, compute, lsa_store) in versioned JSON. It is deliberately small and
// explicit, with no expressions or loops, so that a GPU-side interpreter on
// real hardware can execute the same file.
//
// Decode validates a file strictly (unknown fields, missing or misplaced
// fields, bad enum values) and names the program, the op index and the
// field in its errors. Launch runs a program through the gin Go API on the
// simulator; Recorder (a gin.Hook) turns Go-API code into the program it
// executed (read_window, a device load of window bytes that the semantic
// checker gin/check judges, is not a GIN call and is not recorded).
package prog
