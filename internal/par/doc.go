// Package par runs independent simulations side by side: the concurrency
// at the edges of ginsim (a trace's steps, a sweep's seeds), each run on
// its own goroutine with its own sim.Sim, so that the results and the
// error returned do not depend on how many run at once.
package par
