package moe

import "fmt"

// pendingWorkload is a mode whose device programs are not written yet; it
// fails at setup with a clear error instead of reporting made-up numbers.
type pendingWorkload struct{ what string }

func (w pendingWorkload) setup() error {
	return fmt.Errorf("%s is not implemented yet (only --mode ll and v2 over gdaki or proxy replay today)", w.what)
}
func (pendingWorkload) dispatch() {}
func (pendingWorkload) combine()  {}
