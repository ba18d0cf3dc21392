package site

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// runChart is the workspace overview's picture of recent runs: one bar per
// run, oldest on the left, its height the run's duration and its colour
// the outcome. It is plain SVG drawn on the server; no script draws it.
type runChart struct {
	Width, Height int
	// Baseline is the y of the time axis.
	Baseline int
	Bars     []chartBar
	// MaxLabel names the longest duration, the top of the scale.
	MaxLabel string
	// Counts per outcome, for the legend and the text alternative.
	Succeeded, Failed, Other, Running int
}

// chartBar is one run's bar.
type chartBar struct {
	X, Y, W, H int
	Class      string
	// Title is the bar's tooltip and accessible name.
	Title string
	RunID string
}

const (
	// chartSlots is how many bars fit: a workspace with fewer runs draws
	// them at the same width from the left, so bars always mean the same.
	chartSlots   = 30
	chartWidth   = 640
	chartHeight  = 160
	chartPadding = 20
	chartGap     = 4
)

// outcomeClass sorts a run status into the chart's four outcomes.
func outcomeClass(status string) string {
	switch status {
	case "applied", "planned_and_finished":
		return "bar-ok"
	case "errored", "rejected", "policy_soft_failed", "plan_credentials_required":
		return "bar-bad"
	}
	if !terminal(status) {
		return "bar-live"
	}
	return "bar-other"
}

// chartOf draws runs (as the API lists them, newest first; at most
// chartSlots are drawn). Heights use a square-root scale so one slow run
// does not flatten every other bar.
func chartOf(runs []runSummary) runChart {
	c := runChart{Width: chartWidth, Height: chartHeight, Baseline: chartHeight - chartPadding}
	if len(runs) == 0 {
		return c
	}
	ordered := slices.Clone(runs[:min(len(runs), chartSlots)])
	slices.Reverse(ordered)
	var longest time.Duration
	for _, r := range ordered {
		longest = max(longest, r.Duration())
	}
	c.MaxLabel = humanDuration(longest)
	plot := chartHeight - 2*chartPadding
	slot := (chartWidth - 2*chartPadding) / max(len(ordered), chartSlots)
	barWidth := max(slot-chartGap, 2)
	for i, r := range ordered {
		h := 2
		if longest > 0 {
			h = max(int(math.Round(float64(plot)*math.Sqrt(float64(r.Duration())/float64(longest)))), 2)
		}
		class := outcomeClass(r.Status)
		switch class {
		case "bar-ok":
			c.Succeeded++
		case "bar-bad":
			c.Failed++
		case "bar-live":
			c.Running++
		default:
			c.Other++
		}
		c.Bars = append(c.Bars, chartBar{
			X: chartPadding + i*slot, Y: c.Baseline - h, W: barWidth, H: h, Class: class, RunID: r.ID,
			Title: fmt.Sprintf("%s: %s, %s, %s", r.ID, labelOf(r.Status), humanDuration(r.Duration()),
				r.CreatedAt.UTC().Format("2006-01-02 15:04 UTC")),
		})
	}
	return c
}

func labelOf(status string) string {
	out := []byte(status)
	for i, b := range out {
		if b == '_' {
			out[i] = ' '
		}
	}
	return string(out)
}
