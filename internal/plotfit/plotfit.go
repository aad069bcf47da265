package plotfit

import (
	"fmt"
	"image"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Kind says what a Mark is.
type Kind uint8

// Mark kinds.
const (
	Point   Kind = iota // a point at (X, Y)
	Segment             // a straight line from (X, Y) to (X2, Y2)
	Bar                 // a bar at X, from Y2 up to Y, Off from X and Half wide each side (canvas lengths)
)

// Mark is a piece of data a plot draws, in data coordinates.
type Mark struct {
	Kind      Kind
	X, Y      float64
	X2, Y2    float64
	Off, Half vg.Length
}

// LegendHeight returns the height the plot's legend takes for n entries
// (gonum's Legend.Draw: entries of the tallest text's height, Padding
// between).
func LegendHeight(p *plot.Plot, n int) vg.Length {
	if n == 0 {
		return 0
	}
	h := p.Legend.TextStyle.Height("Mg")
	return vg.Length(n)*h + vg.Length(n-1)*p.Legend.Padding
}

// Headroom returns the top of a linear axis from lo to hi such that a
// band of legend (plus a margin) at the top of a data area of height
// data holds no data. data should be an underestimate (the canvas height
// less the title and the x axis, generously), which only adds room.
func Headroom(lo, hi float64, legend, data vg.Length) float64 {
	free := data - legend - vg.Points(8)
	if free <= data/4 {
		free = data / 4
	}
	return lo + (hi-lo)*float64(data/free)
}

// SparseNominal returns ticks for nominal x values names (at 0, 1, ...,
// as plot.NominalX places them) that label every k-th value, k the least
// that keeps the labels apart on an axis about width long; the others
// get a tick without a label.
func SparseNominal(p *plot.Plot, names []string, width vg.Length) plot.Ticker {
	var wide vg.Length
	for _, n := range names {
		wide = max(wide, p.X.Tick.Label.Width(n))
	}
	k := 1
	if n := len(names); n > 1 {
		step := width / vg.Length(n)
		for vg.Length(k)*step < wide*1.5 {
			k++
		}
	}
	ticks := make(plot.ConstantTicks, len(names))
	for i, n := range names {
		ticks[i].Value = float64(i)
		if i%k == 0 {
			ticks[i].Label = n
		}
	}
	return ticks
}

// Check draws p on a w×h canvas and returns its legibility problems, none
// when it reads well: a text outside the canvas, two unrotated texts
// that overlap (tick labels, legend entries, title, axis labels), a data
// mark under the legend. legend are the legend's entry texts, in order;
// marks the data, in p's data coordinates.
func Check(p *plot.Plot, w, h vg.Length, legend []string, marks []Mark) []string {
	rc := &canvas{}
	c := draw.Canvas{Canvas: rc, Rectangle: vg.Rectangle{Max: vg.Point{X: w, Y: h}}}
	p.Draw(c)
	var probs []string
	bounds := c.Rectangle
	for _, t := range rc.texts {
		if t.r.Min.X < bounds.Min.X-0.5 || t.r.Min.Y < bounds.Min.Y-0.5 || t.r.Max.X > bounds.Max.X+0.5 || t.r.Max.Y > bounds.Max.Y+0.5 {
			probs = append(probs, fmt.Sprintf("text %q at %v is clipped by the canvas %v", t.s, t.r, bounds))
		}
	}
	for i := range rc.texts {
		for j := i + 1; j < len(rc.texts); j++ {
			a, b := rc.texts[i], rc.texts[j]
			if overlap(shrink(a.r), shrink(b.r)) {
				probs = append(probs, fmt.Sprintf("texts %q %v and %q %v overlap", a.s, a.r, b.s, b.r))
			}
		}
	}
	// The legend's rectangle: its entries' texts and, on the side the
	// legend draws them, the thumbnails.
	var lr vg.Rectangle
	found := 0
	for _, t := range rc.texts {
		for _, e := range legend {
			if t.s == e {
				if found == 0 {
					lr = t.r
				} else {
					lr = union(lr, t.r)
				}
				found++
				break
			}
		}
	}
	if found < len(legend) {
		probs = append(probs, fmt.Sprintf("legend: %d of %d entries drawn", found, len(legend)))
	}
	if found == 0 {
		return probs
	}
	em := p.Legend.TextStyle.Width(" ")
	if p.Legend.Left {
		lr.Min.X -= em + p.Legend.ThumbnailWidth
	} else {
		lr.Max.X += em + p.Legend.ThumbnailWidth
	}
	dc := p.DataCanvas(c)
	x, y := p.Transforms(&dc)
	for _, m := range marks {
		if r, ok := markCovered(m, x, y, lr); ok {
			probs = append(probs, fmt.Sprintf("legend %v covers data %v (%+v)", lr, r, m))
		}
	}
	return probs
}

// markCovered reports whether the legend rectangle lr covers mark m,
// and where on the canvas.
func markCovered(m Mark, x, y func(float64) vg.Length, lr vg.Rectangle) (vg.Point, bool) {
	switch m.Kind {
	case Bar:
		cx := x(m.X) + m.Off
		r := vg.Rectangle{Min: vg.Point{X: cx - m.Half, Y: y(min(m.Y, m.Y2))}, Max: vg.Point{X: cx + m.Half, Y: y(max(m.Y, m.Y2))}}
		if overlap(r, lr) {
			return r.Min, true
		}
	case Segment:
		a, b := vg.Point{X: x(m.X), Y: y(m.Y)}, vg.Point{X: x(m.X2), Y: y(m.Y2)}
		const n = 32
		for i := 0; i <= n; i++ {
			f := vg.Length(i) / n
			q := vg.Point{X: a.X + (b.X-a.X)*f, Y: a.Y + (b.Y-a.Y)*f}
			if inside(q, lr) {
				return q, true
			}
		}
	default:
		q := vg.Point{X: x(m.X), Y: y(m.Y)}
		if inside(q, lr) {
			return q, true
		}
	}
	return vg.Point{}, false
}

func inside(q vg.Point, r vg.Rectangle) bool {
	return q.X >= r.Min.X && q.X <= r.Max.X && q.Y >= r.Min.Y && q.Y <= r.Max.Y
}

func overlap(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}

// shrink takes half a point off each side, so that texts that merely
// touch (a glyph's side bearing) do not count as overlapping.
func shrink(r vg.Rectangle) vg.Rectangle {
	d := vg.Points(0.5)
	return vg.Rectangle{Min: vg.Point{X: r.Min.X + d, Y: r.Min.Y + d}, Max: vg.Point{X: r.Max.X - d, Y: r.Max.Y - d}}
}

func union(a, b vg.Rectangle) vg.Rectangle {
	return vg.Rectangle{
		Min: vg.Point{X: min(a.Min.X, b.Min.X), Y: min(a.Min.Y, b.Min.Y)},
		Max: vg.Point{X: max(a.Max.X, b.Max.X), Y: max(a.Max.Y, b.Max.Y)},
	}
}

// A text's ink, in ems of its font size, above and below the baseline:
// the cap height and descenders of Liberation (gonum's default font). The
// font's own ascent and descent are line spacing, larger than the ink:
// gonum stacks legend entries closer than their sum.
const (
	inkAscent  = 0.73
	inkDescent = 0.21
)

// text is a string drawn unrotated, with the extent of its ink.
type text struct {
	s string
	r vg.Rectangle
}

// canvas is a vg.Canvas that keeps the extent of every unrotated text
// and draws nothing. Translations are followed; a text drawn under a
// rotation or scaling (the y axis label) is left out.
type canvas struct {
	state []tstate
	cur   tstate
	texts []text
}

type tstate struct {
	dx, dy vg.Length
	skewed bool
}

func (c *canvas) SetLineWidth(vg.Length)             {}
func (c *canvas) SetLineDash([]vg.Length, vg.Length) {}
func (c *canvas) SetColor(color.Color)               {}
func (c *canvas) Rotate(rad float64) {
	if math.Mod(rad, 2*math.Pi) != 0 {
		c.cur.skewed = true
	}
}
func (c *canvas) Translate(pt vg.Point) { c.cur.dx += pt.X; c.cur.dy += pt.Y }
func (c *canvas) Scale(x, y float64) {
	if x != 1 || y != 1 {
		c.cur.skewed = true
	}
}
func (c *canvas) Push() { c.state = append(c.state, c.cur) }
func (c *canvas) Pop() {
	if n := len(c.state); n > 0 {
		c.cur, c.state = c.state[n-1], c.state[:n-1]
	}
}
func (c *canvas) Stroke(vg.Path)                      {}
func (c *canvas) Fill(vg.Path)                        {}
func (c *canvas) DrawImage(vg.Rectangle, image.Image) {}

func (c *canvas) FillString(f font.Face, pt vg.Point, s string) {
	if c.cur.skewed || s == "" || f.Font.Size == 0 {
		return
	}
	x, y, size := pt.X+c.cur.dx, pt.Y+c.cur.dy, f.Font.Size
	c.texts = append(c.texts, text{s: s, r: vg.Rectangle{Min: vg.Point{X: x, Y: y - inkDescent*size}, Max: vg.Point{X: x + f.Width(s), Y: y + inkAscent*size}}})
}
