// Package plotfit keeps the project's gonum plots legible: Headroom
// raises an axis so that a legend drawn along its top edge has a band of
// its own above the data, and Check, for tests, draws a plot on a
// recording canvas and reports what a reader would trip over: text
// outside the canvas, texts that overlap (tick labels among them) and a
// legend that covers a data mark.
package plotfit
