package main

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// The charts are plain SVG, readable in a browser or on GitHub without
// running anything: grouped horizontal bars for the ratios, one line per
// store for the throughput.

var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2"}

func ratiosSVG(r *results, stores []string) string {
	ratios := []struct{ unit, label string }{
		{"first/bare", "first call / bare write"},
		{"replay/first", "replay / first call"},
		{"elsewhere/first", "repeat elsewhere / first call"},
	}
	const left, barH, gap, width = 200, 14, 18, 640
	max := 1.0
	for _, s := range stores {
		for _, ra := range ratios {
			if v, ok := r.get(s, "BenchmarkSuite/calls", ra.unit); ok {
				max = math.Max(max, v)
			}
		}
	}
	max = math.Ceil(max*2) / 2
	scale := float64(width-left-60) / max
	height := 40 + len(ratios)*(len(stores)*barH+gap) + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14">Ratios within one run, per store (1 = the same cost)</text>`+"\n")
	y := 40
	for _, ra := range ratios {
		fmt.Fprintf(&b, `<text x="10" y="%d">%s</text>`+"\n", y+barH, html.EscapeString(ra.label))
		for i, s := range stores {
			v, ok := r.get(s, "BenchmarkSuite/calls", ra.unit)
			if ok {
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %.2f</title></rect>`+"\n",
					left, y, v*scale, barH-2, palette[i%len(palette)], html.EscapeString(storeTitle[s]), v)
				fmt.Fprintf(&b, `<text x="%.1f" y="%d">%.2f</text>`+"\n", float64(left)+v*scale+4, y+barH-3, v)
			}
			y += barH
		}
		y += gap
	}
	// The line at 1.
	fmt.Fprintf(&b, `<line x1="%.1f" y1="35" x2="%.1f" y2="%d" stroke="#999" stroke-dasharray="4 3"/>`+"\n", float64(left)+scale, float64(left)+scale, y-gap)
	legend(&b, stores, 10, y+8)
	b.WriteString("</svg>\n")
	return b.String()
}

func throughputSVG(r *results, stores []string) string {
	clients := []int{1, 8, 32}
	const left, top, width, plotH = 70, 40, 640, 220
	max := 1.0
	for _, s := range stores {
		for _, n := range clients {
			if v, ok := r.get(s, "BenchmarkSuite/clients="+strconv.Itoa(n), "ops/s"); ok {
				max = math.Max(max, v)
			}
		}
	}
	// Logarithmic: the stores differ by orders of magnitude.
	lmax := math.Ceil(math.Log10(max))
	yOf := func(v float64) float64 { return top + plotH - plotH*math.Log10(math.Max(v, 1))/lmax }
	xOf := func(i int) float64 { return left + float64(i)*float64(width-left-120)/float64(len(clients)-1) }
	height := top + plotH + 70
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14">Distinct ops per second by concurrent clients (log scale)</text>`+"\n")
	for e := 0.0; e <= lmax; e++ {
		y := yOf(math.Pow(10, e))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="10" y="%.1f">%s</text>`+"\n",
			left, y, width-110, y, y+4, strconv.FormatFloat(math.Pow(10, e), 'f', 0, 64))
	}
	for i, n := range clients {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", xOf(i), top+plotH+18, n)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d">clients</text>`+"\n", width-100, top+plotH+18)
	for si, s := range stores {
		var pts []string
		for i, n := range clients {
			if v, ok := r.get(s, "BenchmarkSuite/clients="+strconv.Itoa(n), "ops/s"); ok {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(i), yOf(v)))
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s, %d clients: %.0f ops/s</title></circle>`+"\n",
					xOf(i), yOf(v), palette[si%len(palette)], html.EscapeString(storeTitle[s]), n, v)
			}
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), palette[si%len(palette)])
	}
	legend(&b, stores, 10, top+plotH+34)
	b.WriteString("</svg>\n")
	return b.String()
}

// legend writes one colour swatch and name per store, in a row from (x, y).
func legend(b *strings.Builder, stores []string, x, y int) {
	for i, s := range stores {
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			x, y, palette[i%len(palette)], x+16, y+11, html.EscapeString(storeTitle[s]))
		x += 16 + 8*len(storeTitle[s]) + 20
	}
}
