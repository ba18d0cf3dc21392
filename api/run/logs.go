package run

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairnhq/cairn/api/access"
)

// LogChunk is one sanitized piece of a run's output.
type LogChunk struct {
	Sequence  int64     `db:"sequence" json:"sequence"`
	Phase     string    `db:"phase" json:"phase"`
	Body      string    `db:"body" json:"body"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
}

// LogQuery selects chunks: After/Limit page forward; Tail returns the
// newest n in ascending order. Tail excludes After and Limit.
type LogQuery struct {
	After int64
	Limit int
	Tail  int
}

const (
	maxLogPage   = 100
	maxChunkSize = 32 << 10
	// redacted replaces every secret occurrence in a log line.
	redacted = "(sensitive value)"
)

// Validate checks the query bounds.
func (q LogQuery) Validate() error {
	switch {
	case q.Tail != 0 && (q.After != 0 || q.Limit != 0):
		return fmt.Errorf("%w: tail is mutually exclusive with after and limit", ErrInvalid)
	case q.Tail < 0 || q.Tail > maxLogPage:
		return fmt.Errorf("%w: tail must be 1..%d", ErrInvalid, maxLogPage)
	case q.Limit < 0 || q.Limit > maxLogPage:
		return fmt.Errorf("%w: limit must be 1..%d", ErrInvalid, maxLogPage)
	case q.After < 0:
		return fmt.Errorf("%w: after must not be negative", ErrInvalid)
	}
	return nil
}

// Logs reads a run's sanitized log chunks.
func (s *Service) Logs(ctx context.Context, p access.Principal, runID string, q LogQuery) ([]LogChunk, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	r, err := s.GetRun(ctx, p, runID)
	if err != nil {
		return nil, err
	}
	var out []LogChunk
	if q.Tail > 0 {
		err = s.db.SelectContext(ctx, &out, `SELECT sequence, phase, body, created_at FROM (
			SELECT sequence, phase, body, created_at FROM run_log_chunks WHERE run_id = $1 ORDER BY sequence DESC LIMIT $2
		) t ORDER BY sequence`, r.ID, q.Tail)
	} else {
		limit := q.Limit
		if limit == 0 {
			limit = maxLogPage
		}
		err = s.db.SelectContext(ctx, &out, `SELECT sequence, phase, body, created_at FROM run_log_chunks
			WHERE run_id = $1 AND sequence > $2 ORDER BY sequence LIMIT $3`, r.ID, q.After, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("reading logs: %w", err)
	}
	return out, nil
}

// PhaseLog returns the whole sanitized log of one phase, for the
// remote-backend log URL, and whether the phase has finished writing.
func (s *Service) PhaseLog(ctx context.Context, r Run, phase string) (string, error) {
	var bodies []string
	if err := s.db.SelectContext(ctx, &bodies, `SELECT body FROM run_log_chunks WHERE run_id = $1 AND phase = $2 ORDER BY sequence`,
		r.ID, phase); err != nil {
		return "", fmt.Errorf("reading phase log: %w", err)
	}
	return strings.Join(bodies, ""), nil
}

// MaxPhaseLogBytes bounds the output one phase's commands may add to its
// log. Past it their output is dropped, with one line saying so: a command
// that prints without end fills neither the worker's memory (output waits
// in the sink until the next flush) nor the database. The runner's own
// lines are still kept.
const MaxPhaseLogBytes = 32 << 20

// LogSink receives a phase's raw output, masks every secret it knows, and
// stores the result in ordered chunks. It works line by line so a secret
// split across two writes is still masked; Flush stores what is buffered.
type LogSink struct {
	s       *Service
	runID   string
	phase   string
	masker  *strings.Replacer
	mu      sync.Mutex
	pending bytes.Buffer // complete, masked lines not yet stored
	partial bytes.Buffer // the unfinished last line, unmasked
	next    int64
	// taken counts the command output accepted, toward MaxPhaseLogBytes;
	// cut is set once output was dropped.
	taken int64
	cut   bool
}

// NewLogSink opens a sink that appends after the run's newest chunk.
// secrets are masked in every form the CLI may print them.
func (s *Service) NewLogSink(ctx context.Context, runID, phase string, secrets []string) (*LogSink, error) {
	var last int64
	if err := s.db.GetContext(ctx, &last, `SELECT coalesce(max(sequence), 0) FROM run_log_chunks WHERE run_id = $1`, runID); err != nil {
		return nil, fmt.Errorf("reading log position: %w", err)
	}
	return &LogSink{s: s, runID: runID, phase: phase, masker: masker(secrets), next: last + 1}, nil
}

// masker replaces each secret, and its quoted and escaped spellings,
// longest first so a secret containing another is masked whole.
func masker(secrets []string) *strings.Replacer {
	var forms []string
	seen := map[string]bool{}
	for _, sec := range secrets {
		if len(sec) < 3 {
			// Too short to mask without destroying the log; such values
			// are still never printed by tofu, which masks sensitive values.
			continue
		}
		quoted := strconv.Quote(sec)
		for _, f := range []string{sec, quoted[1 : len(quoted)-1]} {
			if !seen[f] {
				seen[f] = true
				forms = append(forms, f)
			}
		}
	}
	// Longest first: strings.Replacer tries old strings in argument order.
	for i := range forms {
		for j := i + 1; j < len(forms); j++ {
			if len(forms[j]) > len(forms[i]) {
				forms[i], forms[j] = forms[j], forms[i]
			}
		}
	}
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, redacted)
	}
	return strings.NewReplacer(pairs...)
}

// Write buffers command output; complete lines are masked immediately.
// Output past MaxPhaseLogBytes is dropped, the unfinished line with it (a
// secret cut in two would not be masked).
func (l *LogSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		return len(p), nil
	}
	take := p
	if left := MaxPhaseLogBytes - l.taken; int64(len(p)) > left {
		take, l.cut = p[:left], true
	}
	l.taken += int64(len(take))
	l.add(take)
	if l.cut {
		l.partial.Reset()
		fmt.Fprintf(&l.pending, "\n(Cairn: this phase's output passed %d MiB; the rest of it is not kept.)\n", MaxPhaseLogBytes>>20)
	}
	return len(p), nil
}

// add buffers p, masking complete lines; l.mu is held.
func (l *LogSink) add(p []byte) {
	l.partial.Write(p)
	data := l.partial.Bytes()
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		l.pending.WriteString(l.masker.Replace(string(data[:i+1])))
		rest := append([]byte(nil), data[i+1:]...)
		l.partial.Reset()
		l.partial.Write(rest)
	}
	// A pathological line with no newline is masked and cut so the buffer
	// stays bounded.
	if l.partial.Len() > maxChunkSize {
		l.pending.WriteString(l.masker.Replace(l.partial.String()))
		l.partial.Reset()
	}
}

// Flush stores buffered complete lines; final also stores the unfinished
// last line.
func (l *LogSink) Flush(ctx context.Context, final bool) error {
	l.mu.Lock()
	if final && l.partial.Len() > 0 {
		l.pending.WriteString(l.masker.Replace(l.partial.String()))
		l.partial.Reset()
	}
	body := l.pending.String()
	l.pending.Reset()
	seq := l.next
	l.mu.Unlock()
	for len(body) > 0 {
		n := min(len(body), maxChunkSize)
		if n < len(body) {
			if i := strings.LastIndexByte(body[:n], '\n'); i > 0 {
				n = i + 1
			}
		}
		if _, err := l.s.db.ExecContext(ctx, `INSERT INTO run_log_chunks (run_id, sequence, phase, body) VALUES ($1, $2, $3, $4)`,
			l.runID, seq, l.phase, body[:n]); err != nil {
			return fmt.Errorf("storing log chunk: %w", err)
		}
		body = body[n:]
		seq++
	}
	l.mu.Lock()
	l.next = seq
	l.mu.Unlock()
	return nil
}

// Line appends one line written by the runner itself (not the CLI); it
// does not count toward MaxPhaseLogBytes.
func (l *LogSink) Line(format string, args ...any) {
	line := fmt.Appendf(nil, format+"\n", args...)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.add(line)
}
