package sim

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// drawChart writes an SVG of the simulation to path: a token bucket alone
// as a chart, with its tokens, and any other run as a stack of panels.
func drawChart(cfg simConfig, res simResult, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	write := newStack(cfg, res).writeSVG
	switch {
	case cfg.adaptive != nil:
		write = newAdaptiveChart(cfg, res).writeSVG
	case len(res.runs) == 1 && res.runs[0].kind == bucketShape:
		write = newChart(cfg, res.runs[0]).writeSVG
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Colours and strokes, as SVG style declarations.
const (
	admitColor = "#1f77b4"
	denyColor  = "#d62728"
	axisStyle  = "fill:none;stroke:#000;stroke-width:0.5"
	gridStyle  = "fill:none;stroke:#ccc;stroke-width:0.5"
	lineStyle  = "fill:none;stroke:" + admitColor + ";stroke-width:1;stroke-linejoin:round"
	rateStyle  = "fill:none;stroke:#000;stroke-width:1.5"
	markStyle  = "fill:none;stroke:#555;stroke-width:1;stroke-dasharray:4,3"
	pauseStyle = "fill:#e8e8e8"
	fontFamily = "DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif"
)

// labelGround is the white behind a label of a change: the marks and the
// line show through a little.
const labelGround = "fill:#fff;fill-opacity:0.93"

// writeSVG writes the chart as an SVG document.
func (c *chart) writeSVG(w io.Writer) error {
	s := svgWriter{bufio.NewWriter(w)}
	s.header(chartWidth, chartHeight)
	s.rect(box{0, 0, chartWidth, chartHeight}, "fill:#fff")
	s.text((plotLeft+plotRight)/2, 18, "middle", titleSize, c.title)

	top := c.tokens
	s.pauses(top, c.pauses)
	s.pauses(c.counts, c.pauses)
	for _, t := range top.xTicks {
		s.line(top.x(t.value), top.area.minY, top.x(t.value), top.area.maxY, gridStyle)
	}
	for _, t := range top.yTicks {
		s.line(top.area.minX, top.y(t.value), top.area.maxX, top.y(t.value), gridStyle)
	}
	s.axes(top)
	for _, x := range c.changes {
		s.line(top.x(x), top.area.maxY, top.x(x), top.area.minY, markStyle)
	}
	s.polyline(top, c.tokenLine, lineStyle)
	for i, b := range c.labelBoxes {
		s.rect(b, labelGround)
		s.text(b.minX+labelPad, b.minY+labelPad+fontSize, "start", fontSize, c.labels[i])
	}

	bottom := c.counts
	s.axes(bottom)
	s.text((plotLeft+plotRight)/2, chartHeight-8, "middle", axisSize, "time (s)")
	for _, x := range c.changes {
		// The marks stop short of the legend, wherever they cross it.
		px, end := bottom.x(x), bottom.area.minY
		if px >= c.legend.minX-legendMargin && px <= bottom.area.maxX {
			end = c.legend.maxY + legendMargin
		}
		s.line(px, bottom.area.maxY, px, end, markStyle)
	}
	for _, b := range c.bars {
		if b.count == 0 {
			continue
		}
		color := admitColor
		if b.denied {
			color = denyColor
		}
		s.rectPath(box{bottom.x(b.from), bottom.y(b.count), bottom.x(b.to), bottom.area.maxY}, "fill:"+color)
	}
	s.rateLine(bottom, c.rate, c.ceiling)
	for i, name := range c.legendNames {
		y := c.legend.minY + float64(i)*legendRow
		sw := box{c.legend.minX, y + 2, c.legend.minX + swatchWidth, y + legendRow - 2}
		switch i {
		case 0:
			s.rectPath(sw, "fill:"+admitColor)
		case 1:
			s.rectPath(sw, "fill:"+denyColor)
		default:
			s.line(sw.minX, (sw.minY+sw.maxY)/2, sw.maxX, (sw.minY+sw.maxY)/2, rateStyle)
		}
		s.text(sw.maxX+swatchGap, y+legendRow-3, "start", fontSize, name)
	}
	s.w.WriteString("</svg>\n")
	return s.w.Flush()
}

// writeSVG writes the stack as an SVG document.
func (st *stack) writeSVG(w io.Writer) error {
	s := svgWriter{bufio.NewWriter(w)}
	s.header(chartWidth, st.height)
	s.rect(box{0, 0, chartWidth, st.height}, "fill:#fff")
	s.text((plotLeft+plotRight)/2, 18, "middle", titleSize, st.title)
	for i, sp := range st.panels {
		p := sp.panel
		last := i == len(st.panels)-1
		s.text(p.area.minX, p.area.minY-6, "start", sp.titleSize, sp.title)
		s.pauses(p, st.pauses)
		for _, t := range p.xTicks {
			s.line(p.x(t.value), p.area.minY, p.x(t.value), p.area.maxY, gridStyle)
		}
		for _, t := range p.yTicks {
			s.line(p.area.minX, p.y(t.value), p.area.maxX, p.y(t.value), gridStyle)
		}
		if !last {
			// One time axis for all: only the last panel labels it.
			p.xTicks = unlabelled(p.xTicks)
		}
		s.axes(p)
		for _, x := range sp.marks {
			px, end := p.x(x), p.area.minY
			if px >= sp.legend.minX-legendMargin && px <= p.area.maxX {
				end = sp.legend.maxY + legendMargin
			}
			s.line(px, p.area.maxY, px, end, markStyle)
		}
		for _, b := range sp.bars {
			if b.count == 0 {
				continue
			}
			color := admitColor
			if b.denied {
				color = denyColor
			}
			s.rectPath(box{p.x(b.from), p.y(b.count), p.x(b.to), p.area.maxY}, "fill:"+color)
		}
		if sp.line != nil {
			s.rateLine(p, sp.line, sp.ceiling)
		}
		for j, name := range sp.legendNames {
			y := sp.legend.minY + float64(j)*legendRow
			sw := box{sp.legend.minX, y + 2, sp.legend.minX + swatchWidth, y + legendRow - 2}
			mid := (sw.minY + sw.maxY) / 2
			switch {
			case j == 0:
				s.rectPath(sw, "fill:"+admitColor)
			case j == 1:
				s.rectPath(sw, "fill:"+denyColor)
			case name == sp.lineName:
				s.line(sw.minX, mid, sw.maxX, mid, rateStyle)
			default:
				s.line(sw.minX, mid, sw.maxX, mid, markStyle)
			}
			s.text(sw.maxX+swatchGap, y+legendRow-3, "start", fontSize, name)
		}
	}
	s.text((plotLeft+plotRight)/2, st.height-8, "middle", axisSize, st.xLabel)
	s.w.WriteString("</svg>\n")
	return s.w.Flush()
}

// writeSVG writes the adaptive chart as an SVG document.
func (c *adaptiveChart) writeSVG(w io.Writer) error {
	s := svgWriter{bufio.NewWriter(w)}
	s.header(chartWidth, chartHeight)
	s.rect(box{0, 0, chartWidth, chartHeight}, "fill:#fff")
	s.text((plotLeft+plotRight)/2, 18, "middle", fitSize(c.title, titleSize, plotRight-plotLeft), c.title)
	for i, p := range []panel{c.counts, c.latency} {
		s.pauses(p, c.pauses)
		for _, t := range p.xTicks {
			s.line(p.x(t.value), p.area.minY, p.x(t.value), p.area.maxY, gridStyle)
		}
		for _, t := range p.yTicks {
			s.line(p.area.minX, p.y(t.value), p.area.maxX, p.y(t.value), gridStyle)
		}
		if i == 0 {
			// One time axis for both: only the bottom panel labels it.
			p.xTicks = unlabelled(p.xTicks)
		}
		s.axes(p)
	}

	top := c.counts
	for _, b := range c.bars {
		if b.count == 0 {
			continue
		}
		// A stroke of the fill's colour closes the hairline seams that
		// antialiasing leaves between bars side by side.
		color := admitLight
		if b.denied {
			color = denyColor
		}
		s.rectPath(box{top.x(b.from), top.y(b.count), top.x(b.to), top.area.maxY}, "fill:"+color+";stroke:"+color+";stroke-width:0.4")
	}
	// The capacity over the rate: where they are equal, its dashes still
	// show.
	s.polyline(top, c.rate, rateStyle)
	s.polyline(top, c.capacity, capacityStyle)
	for i, name := range c.countsNames {
		sw, y := swatch(c.countsLegend, i)
		mid := (sw.minY + sw.maxY) / 2
		switch i {
		case 0:
			s.rectPath(sw, "fill:"+admitLight)
		case 1:
			s.rectPath(sw, "fill:"+denyColor)
		case 2:
			s.line(sw.minX, mid, sw.maxX, mid, rateStyle)
		default:
			s.line(sw.minX, mid, sw.maxX, mid, capacityStyle)
		}
		s.text(sw.maxX+swatchGap, y+legendRow-3, "start", fontSize, name)
	}

	bottom := c.latency
	s.line(bottom.area.minX, bottom.y(c.target), bottom.area.maxX, bottom.y(c.target), targetStyle)
	s.polyline(bottom, c.p99, p99Style)
	for i, name := range c.latencyNames {
		sw, y := swatch(c.latencyLegend, i)
		mid := (sw.minY + sw.maxY) / 2
		style := p99Style
		if i == 1 {
			style = targetStyle
		}
		s.line(sw.minX, mid, sw.maxX, mid, style)
		s.text(sw.maxX+swatchGap, y+legendRow-3, "start", fontSize, name)
	}
	s.text((plotLeft+plotRight)/2, chartHeight-8, "middle", axisSize, c.xLabel)
	s.w.WriteString("</svg>\n")
	return s.w.Flush()
}

// swatch is the sample of row i of a legend, and the row's top.
func swatch(legend box, i int) (box, float64) {
	y := legend.minY + float64(i)*legendRow
	return box{legend.minX, y + 2, legend.minX + swatchWidth, y + legendRow - 2}, y
}

// pauses shades the client's pauses in p.
func (s svgWriter) pauses(p panel, spans []span) {
	for _, sp := range spans {
		s.rect(box{p.x(sp.from), p.area.minY, p.x(sp.to), p.area.maxY}, pauseStyle)
	}
}

// unlabelled is ticks without their labels.
func unlabelled(ticks []tick) []tick {
	out := make([]tick, len(ticks))
	for i, t := range ticks {
		out[i] = tick{value: t.value}
	}
	return out
}

// header starts an SVG document of the size of the page.
func (s svgWriter) header(width, height float64) {
	fmt.Fprintf(s.w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"+
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%spt\" height=\"%spt\" viewBox=\"0 0 %s %s\" font-family=\"%s\">\n",
		num(width), num(height), num(width), num(height), fontFamily)
}

// svgWriter writes SVG elements; the first error sticks in the
// bufio.Writer and comes back from its Flush.
type svgWriter struct{ w *bufio.Writer }

// num formats a coordinate: two decimals are a hundredth of a point.
func num(v float64) string {
	return formatTick(v, 2)
}

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func (s svgWriter) text(x, y float64, anchor string, size float64, text string) {
	fmt.Fprintf(s.w, "<text x=\"%s\" y=\"%s\" text-anchor=\"%s\" font-size=\"%s\">%s</text>\n",
		num(x), num(y), anchor, num(size), escaper.Replace(text))
}

func (s svgWriter) line(x0, y0, x1, y1 float64, style string) {
	fmt.Fprintf(s.w, "<path d=\"M%s %sL%s %s\" style=\"%s\"/>\n", num(x0), num(y0), num(x1), num(y1), style)
}

func (s svgWriter) rect(b box, style string) {
	fmt.Fprintf(s.w, "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" style=\"%s\"/>\n",
		num(b.minX), num(b.minY), num(b.maxX-b.minX), num(b.maxY-b.minY), style)
}

// rectPath is a rectangle drawn as a path: the bars and swatches.
func (s svgWriter) rectPath(b box, style string) {
	fmt.Fprintf(s.w, "<path d=\"M%s %sH%sV%sH%sZ\" style=\"%s\"/>\n",
		num(b.minX), num(b.minY), num(b.maxX), num(b.maxY), num(b.minX), style)
}

func (s svgWriter) polyline(p panel, pts []point, style string) {
	if len(pts) == 0 {
		return
	}
	s.w.WriteString(`<path d="`)
	for i, q := range pts {
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		fmt.Fprintf(s.w, "%s%s %s", cmd, num(p.x(q.x)), num(p.y(q.y)))
	}
	fmt.Fprintf(s.w, "\" style=\"%s\"/>\n", style)
}

// rateLine draws the rate's steps cut off above ceiling: a level above
// it is left out, and a step up ends there.
func (s svgWriter) rateLine(p panel, pts []point, ceiling float64) {
	var d strings.Builder
	pen := false
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		if min(a.y, b.y) > ceiling {
			pen = false
			continue
		}
		a.y, b.y = min(a.y, ceiling), min(b.y, ceiling)
		if !pen {
			fmt.Fprintf(&d, "M%s %s", num(p.x(a.x)), num(p.y(a.y)))
		}
		fmt.Fprintf(&d, "L%s %s", num(p.x(b.x)), num(p.y(b.y)))
		// A step up cut off at the ceiling goes on from its top only if
		// the level after it is drawn.
		pen = b.y == pts[i].y
	}
	if d.Len() > 0 {
		fmt.Fprintf(s.w, "<path d=\"%s\" style=\"%s\"/>\n", d.String(), rateStyle)
	}
}

// axes draws p's left and bottom axes with their ticks, tick labels and
// the Y axis's name.
func (s svgWriter) axes(p panel) {
	const tickLen = 4
	a := p.area
	s.line(a.minX, a.minY, a.minX, a.maxY, axisStyle)
	s.line(a.minX, a.maxY, a.maxX, a.maxY, axisStyle)
	for _, t := range p.xTicks {
		x := p.x(t.value)
		s.line(x, a.maxY, x, a.maxY+tickLen, axisStyle)
		if t.label != "" {
			s.text(x, a.maxY+tickLen+fontSize+1, "middle", fontSize, t.label)
		}
	}
	for _, t := range p.yTicks {
		y := p.y(t.value)
		s.line(a.minX-tickLen, y, a.minX, y, axisStyle)
		s.text(a.minX-tickLen-2, y+fontSize*0.35, "end", fontSize, t.label)
	}
	x, y := 16.0, (a.minY+a.maxY)/2
	size := p.yLabelSize
	if size == 0 {
		size = axisSize
	}
	fmt.Fprintf(s.w, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" font-size=\"%s\" transform=\"rotate(-90 %s %s)\">%s</text>\n",
		num(x), num(y), num(size), num(x), num(y), escaper.Replace(p.yLabel))
}
