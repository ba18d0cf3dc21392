package site

import (
	"testing"
	"time"
)

func TestChartDrawsOneBarPerRunOldestFirst(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	run := func(id, status string, took time.Duration, age int) runSummary {
		created := start.Add(time.Duration(age) * time.Hour)
		return runSummary{ID: id, Status: status, CreatedAt: created, UpdatedAt: created.Add(took)}
	}
	// The API lists newest first.
	runs := []runSummary{
		run("run_d", "applied", 4*time.Minute, 3),
		run("run_c", "errored", time.Minute, 2),
		run("run_b", "canceled", 0, 1),
		run("run_a", "planned_and_finished", 16*time.Minute, 0),
	}
	c := chartOf(runs)
	if len(c.Bars) != 4 || c.Bars[0].RunID != "run_a" || c.Bars[3].RunID != "run_d" {
		t.Fatalf("bars not oldest first: %+v", c.Bars)
	}
	if c.Succeeded != 2 || c.Failed != 1 || c.Other != 1 || c.Running != 0 {
		t.Fatalf("counts %d/%d/%d/%d", c.Succeeded, c.Failed, c.Other, c.Running)
	}
	// Square-root scale: 16 minutes fills the plot, 4 minutes half of it.
	plot := chartHeight - 2*chartPadding
	if c.Bars[0].H != plot || c.Bars[3].H != plot/2 {
		t.Fatalf("heights %d and %d, want %d and %d", c.Bars[0].H, c.Bars[3].H, plot, plot/2)
	}
	// A run with no duration still shows, and every bar sits on the axis
	// inside the picture.
	for _, b := range c.Bars {
		if b.H < 2 || b.Y+b.H != c.Baseline || b.X+b.W > chartWidth-chartPadding || b.Y < chartPadding {
			t.Fatalf("bar out of place: %+v", b)
		}
	}
	if c.MaxLabel != "16 m 00 s" {
		t.Fatalf("scale label %q", c.MaxLabel)
	}
	if len(chartOf(nil).Bars) != 0 {
		t.Fatal("no runs drew bars")
	}
}

func TestSectionOfNamesWhereTheReaderIs(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/runs": "runs", "/runs/run_1": "runs", "/workspaces/ws_1/variables": "workspaces",
		"/organization/audit": "organization", "/organizations": "organization", "/registry/modules/mod_1": "registry", "/runsx": "", "/": "",
	} {
		if got := sectionOf(path); got != want {
			t.Errorf("sectionOf(%q) = %q, want %q", path, got, want)
		}
	}
}
