// Package replaytest holds what the tests of the replay driver and of the
// workloads share: both GIN backends and the small traces they replay.
package replaytest
