// Package obslog writes and reads an observer event stream (sim/obs) as
// JSON Lines: one object per event, in emission order, times in integer
// picoseconds, the kind by name, zero fields left out. A Writer is an
// obs.Observer, so recording a run is subscribing one to the run's bus;
// Read turns a file back into the events, reporting the line and field
// of anything it cannot accept. traces/critpath and the verification
// checker consume the stream live or from such a file alike.
package obslog
