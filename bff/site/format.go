package site

import (
	"fmt"
	"time"
)

// since is a relative creation time ("3 minutes ago").
func since(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return plural(int(d/time.Minute), "minute") + " ago"
	case d < 24*time.Hour:
		return plural(int(d/time.Hour), "hour") + " ago"
	default:
		return plural(int(d/(24*time.Hour)), "day") + " ago"
	}
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// humanDuration is a short duration: "850 ms", "12.3 s", "4 m 05 s".
func humanDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%d m %02d s", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%d h %02d m", int(d.Hours()), int(d.Minutes())%60)
	}
}

// shortDigest shows the first 12 characters of a digest.
func shortDigest(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// itoaBytes is a byte count in words: "1 byte", "2048 bytes".
func itoaBytes(n int) string { return plural(n, "byte") }
