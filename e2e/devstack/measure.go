package devstack

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// SyntheticState yields a deterministic JSON state of exactly n bytes: a
// header, one output, and a resources array padded to size.
func SyntheticState(n int) io.Reader {
	head := `{"version":4,"terraform_version":"1.10.6","serial":1,"lineage":"bench","outputs":{"o":{"value":"v","type":"string"}},"resources":[`
	tail := `]}`
	item := `{"mode":"managed","type":"terraform_data","name":"r","instances":[{"attributes":{"input":"` + strings.Repeat("x", 200) + `"}}]}`
	var b strings.Builder
	b.WriteString(head)
	first := true
	for b.Len()+len(item)+1+len(tail) <= n {
		if !first {
			b.WriteByte(',')
		}
		b.WriteString(item)
		first = false
	}
	// Pad inside the last string so the document stays valid JSON.
	s := b.String()
	pad := n - len(s) - len(tail)
	s = s[:len(s)-len(`"}}]}`)] + strings.Repeat("y", pad) + `"}}]}`
	return strings.NewReader(s + tail)
}

// RSSSampler records the peak resident set of a process.
type RSSSampler struct {
	pid  int
	peak atomic.Int64
	stop chan struct{}
	done chan struct{}
}

// ReadRSS returns the resident set of pid in bytes (0 when unreadable).
func ReadRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// SampleRSS samples the resident set of pid every 10 ms until Stop.
func SampleRSS(pid int) *RSSSampler {
	r := &RSSSampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			if v := ReadRSS(pid); v > r.peak.Load() {
				r.peak.Store(v)
			}
			select {
			case <-r.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return r
}

// Stop ends sampling and returns the peak seen.
func (r *RSSSampler) Stop() int64 {
	close(r.stop)
	<-r.done
	return r.peak.Load()
}
