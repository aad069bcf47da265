// Package atomicfile writes output files all-or-nothing: the content goes to
// a temporary file in the target's directory, which replaces the target only
// when writing succeeded. A failed run leaves no half-written output.
package atomicfile
