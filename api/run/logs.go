package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/mask"
)

// LogChunk is one sanitized piece of a run's output.
type LogChunk struct {
	Sequence  int64     `db:"sequence" json:"sequence"`
	Phase     string    `db:"phase" json:"phase" enum:"plan,policy,apply"`
	Body      string    `db:"body" json:"body"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
}

// LogPhasePolicy is the policy stage's log. It is written by the plan
// attempt that evaluates the policies, between its plan log and the apply
// log, so one run's log still reads in sequence order; no attempt runs a
// policy phase.
const LogPhasePolicy = "policy"

// LogPhases are the phases a log chunk may belong to, in the order a run
// writes them.
var LogPhases = []string{PhasePlan, LogPhasePolicy, PhaseApply}

// LogQuery selects chunks: After/Limit page forward; Tail returns the
// newest n in ascending order. Tail excludes After and Limit. Phase, when
// set, keeps only that phase's chunks; sequences stay the run's, so a
// phase's chunks are numbered with gaps.
type LogQuery struct {
	After int64
	Limit int
	Tail  int
	Phase string
}

// MaxLogPage is the most chunks one log read returns.
const MaxLogPage = 100

const (
	maxChunkSize = 32 << 10
	// redacted replaces every secret occurrence in a log line.
	redacted = "(sensitive value)"
)

// Validate checks the query bounds.
func (q LogQuery) Validate() error {
	switch {
	case q.Tail != 0 && (q.After != 0 || q.Limit != 0):
		return fmt.Errorf("%w: tail is mutually exclusive with after and limit", ErrInvalid)
	case q.Tail < 0 || q.Tail > MaxLogPage:
		return fmt.Errorf("%w: tail must be 1..%d", ErrInvalid, MaxLogPage)
	case q.Limit < 0 || q.Limit > MaxLogPage:
		return fmt.Errorf("%w: limit must be 1..%d", ErrInvalid, MaxLogPage)
	case q.After < 0:
		return fmt.Errorf("%w: after must not be negative", ErrInvalid)
	case q.Phase != "" && !slices.Contains(LogPhases, q.Phase):
		return fmt.Errorf("%w: phase must be one of %s", ErrInvalid, strings.Join(LogPhases, ", "))
	}
	return nil
}

// Logs reads a run's sanitized log chunks, from table rows and sealed
// segments alike, in sequence order.
func (s *Service) Logs(ctx context.Context, p access.Principal, runID string, q LogQuery) ([]LogChunk, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	r, err := s.GetRun(ctx, p, runID)
	if err != nil {
		return nil, err
	}
	if q.Tail > 0 {
		return s.logTail(ctx, r.ID, q.Phase, q.Tail)
	}
	limit := q.Limit
	if limit == 0 {
		limit = MaxLogPage
	}
	var segs []logSegment
	var rows []LogChunk
	err = s.inLogSnapshot(ctx, func(tx *sqlx.Tx) error {
		// A segment holds one phase's chunks, so the phase filter applies
		// to segments and rows alike.
		if err := tx.SelectContext(ctx, &segs, `SELECT `+segmentColumns+` FROM run_log_segments
			WHERE run_id = $1 AND last_sequence > $2 AND ($4 = '' OR phase = $4) ORDER BY first_sequence LIMIT $3`,
			r.ID, q.After, limit, q.Phase); err != nil {
			return fmt.Errorf("reading log segments: %w", err)
		}
		if err := tx.SelectContext(ctx, &rows, `SELECT sequence, phase, body, created_at FROM run_log_chunks
			WHERE run_id = $1 AND sequence > $2 AND ($4 = '' OR phase = $4) ORDER BY sequence LIMIT $3`,
			r.ID, q.After, limit, q.Phase); err != nil {
			return fmt.Errorf("reading logs: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Segments and rows cover disjoint sequence ranges that interleave
	// (a phase's short tail stays in rows while the next phase is sealed).
	out := make([]LogChunk, 0, min(limit, len(rows)+len(segs)))
	for _, seg := range segs {
		for len(rows) > 0 && rows[0].Sequence < seg.FirstSequence && len(out) < limit {
			out, rows = append(out, rows[0]), rows[1:]
		}
		if len(out) == limit {
			return out, nil
		}
		if out, err = s.appendSegment(ctx, out, seg, q.After, limit); err != nil {
			return nil, err
		}
	}
	for len(rows) > 0 && len(out) < limit {
		out, rows = append(out, rows[0]), rows[1:]
	}
	return out, nil
}

// appendSegment appends the segment's chunks after sequence after to out,
// until out holds limit.
func (s *Service) appendSegment(ctx context.Context, out []LogChunk, seg logSegment, after int64, limit int) ([]LogChunk, error) {
	sr, err := s.openSegment(ctx, seg)
	if err != nil {
		return nil, err
	}
	defer sr.Close()
	for len(out) < limit {
		c, err := sr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading log segment: %w", err)
		}
		if c.Sequence > after {
			out = append(out, c)
		}
	}
	return out, nil
}

// logTail returns the newest n chunks (of phase, unless it is empty) in
// ascending order. It walks back from the newest: table rows, then whole
// segments, of which only the last chunks still needed are kept.
func (s *Service) logTail(ctx context.Context, runID, phase string, n int) ([]LogChunk, error) {
	var segs []logSegment
	var rows []LogChunk
	err := s.inLogSnapshot(ctx, func(tx *sqlx.Tx) error {
		if err := tx.SelectContext(ctx, &segs, `SELECT `+segmentColumns+` FROM run_log_segments
			WHERE run_id = $1 AND ($3 = '' OR phase = $3) ORDER BY first_sequence DESC LIMIT $2`, runID, n, phase); err != nil {
			return fmt.Errorf("reading log segments: %w", err)
		}
		if err := tx.SelectContext(ctx, &rows, `SELECT sequence, phase, body, created_at FROM run_log_chunks
			WHERE run_id = $1 AND ($3 = '' OR phase = $3) ORDER BY sequence DESC LIMIT $2`, runID, n, phase); err != nil {
			return fmt.Errorf("reading logs: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var newestFirst []LogChunk
	for len(newestFirst) < n && (len(rows) > 0 || len(segs) > 0) {
		if len(rows) > 0 && (len(segs) == 0 || rows[0].Sequence > segs[0].LastSequence) {
			newestFirst, rows = append(newestFirst, rows[0]), rows[1:]
			continue
		}
		last, err := s.segmentTail(ctx, segs[0], n-len(newestFirst))
		if err != nil {
			return nil, err
		}
		newestFirst, segs = append(newestFirst, last...), segs[1:]
	}
	slices.Reverse(newestFirst)
	return newestFirst, nil
}

// segmentTail returns a segment's last k chunks, newest first.
func (s *Service) segmentTail(ctx context.Context, seg logSegment, k int) ([]LogChunk, error) {
	sr, err := s.openSegment(ctx, seg)
	if err != nil {
		return nil, err
	}
	defer sr.Close()
	ring := make([]LogChunk, 0, k)
	count := 0
	for ; ; count++ {
		c, err := sr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading log segment: %w", err)
		}
		if len(ring) < k {
			ring = append(ring, c)
		} else {
			ring[count%k] = c
		}
	}
	// Once the ring wrapped, the oldest chunk kept is at count % k.
	out := make([]LogChunk, 0, len(ring))
	start := 0
	if count > k {
		start = count % k
	}
	for i := range ring {
		out = append(out, ring[(start+i)%len(ring)])
	}
	slices.Reverse(out)
	return out, nil
}

// PhaseLogRange is a byte range of one phase's log.
type PhaseLogRange struct {
	io.ReadCloser
	// Total is the phase log's length when it was read; the reader yields
	// the bytes of the range that lie before it.
	Total int64
	// Size is how many bytes the reader yields.
	Size int64
}

// OpenPhaseLog returns bytes from to (exclusive; a negative to means the
// end) of one phase's sanitized log, for the remote-backend log URL. It
// reads only what the range covers: the table rows it overlaps and the
// sealed segments it overlaps, streamed one record at a time.
func (s *Service) OpenPhaseLog(ctx context.Context, r Run, phase string, from, to int64) (PhaseLogRange, error) {
	var segs []logSegment
	var tableBytes int64
	var rows []struct {
		Body   string `db:"body"`
		Offset int64  `db:"offset"`
	}
	from = max(from, 0)
	err := s.inLogSnapshot(ctx, func(tx *sqlx.Tx) error {
		if err := tx.SelectContext(ctx, &segs, `SELECT `+segmentColumns+` FROM run_log_segments
			WHERE run_id = $1 AND phase = $2 ORDER BY first_sequence`, r.ID, phase); err != nil {
			return fmt.Errorf("reading log segments: %w", err)
		}
		if err := tx.GetContext(ctx, &tableBytes, `SELECT coalesce(sum(octet_length(body)), 0) FROM run_log_chunks
			WHERE run_id = $1 AND phase = $2`, r.ID, phase); err != nil {
			return fmt.Errorf("measuring log: %w", err)
		}
		var base int64
		for _, seg := range segs {
			base += seg.TextBytes
		}
		hi := int64(math.MaxInt64)
		if to >= 0 {
			hi = to - base
		}
		// Rows are numbered by their running offset; only those that
		// overlap the range leave the database.
		if err := tx.SelectContext(ctx, &rows, `SELECT body, "offset" FROM (
				SELECT body, sum(octet_length(body)) OVER (ORDER BY sequence) - octet_length(body) AS "offset"
				FROM run_log_chunks WHERE run_id = $1 AND phase = $2) t
			WHERE "offset" + octet_length(body) > $3 AND "offset" < $4 ORDER BY "offset"`,
			r.ID, phase, from-base, hi); err != nil {
			return fmt.Errorf("reading logs: %w", err)
		}
		for i := range rows {
			rows[i].Offset += base
		}
		return nil
	})
	if err != nil {
		return PhaseLogRange{}, err
	}
	total := tableBytes
	for _, seg := range segs {
		total += seg.TextBytes
	}
	if to < 0 || to > total {
		to = total
	}
	pr := &phaseLogReader{ctx: ctx, s: s}
	for _, seg := range segs {
		if seg.PhaseOffset+seg.TextBytes <= from || seg.PhaseOffset >= to {
			continue
		}
		pr.segments = append(pr.segments, segmentPiece{seg: seg,
			skip: max(from-seg.PhaseOffset, 0), take: min(to, seg.PhaseOffset+seg.TextBytes) - max(from, seg.PhaseOffset)})
	}
	var table strings.Builder
	for _, row := range rows {
		lo, hi := max(from-row.Offset, 0), min(to-row.Offset, int64(len(row.Body)))
		if lo < hi {
			table.WriteString(row.Body[lo:hi])
		}
	}
	pr.table = strings.NewReader(table.String())
	return PhaseLogRange{ReadCloser: pr, Total: total, Size: max(to-from, 0)}, nil
}

// segmentPiece is the part of one segment a range covers.
type segmentPiece struct {
	seg        logSegment
	skip, take int64
}

// phaseLogReader yields a range: the segments it covers, opened one at a
// time as reading reaches them, then the table rows' text.
type phaseLogReader struct {
	ctx      context.Context
	s        *Service
	segments []segmentPiece
	open     *segmentReader
	cur      io.Reader
	table    io.Reader
}

func (p *phaseLogReader) Read(b []byte) (int, error) {
	for {
		if p.cur == nil {
			if len(p.segments) == 0 {
				return p.table.Read(b)
			}
			piece := p.segments[0]
			p.segments = p.segments[1:]
			sr, err := p.s.openSegment(p.ctx, piece.seg)
			if err != nil {
				return 0, err
			}
			p.open = sr
			text := &segmentText{sr: sr}
			if _, err := io.CopyN(io.Discard, text, piece.skip); err != nil {
				return 0, fmt.Errorf("reading log segment: %w", err)
			}
			p.cur = io.LimitReader(text, piece.take)
		}
		n, err := p.cur.Read(b)
		if errors.Is(err, io.EOF) {
			p.closeSegment()
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

func (p *phaseLogReader) closeSegment() {
	if p.open != nil {
		p.open.Close()
	}
	p.open, p.cur = nil, nil
}

func (p *phaseLogReader) Close() error {
	p.closeSegment()
	return nil
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
	s     *Service
	runID string
	phase string
	// flushing serializes flushes, which number chunks from next; mu
	// guards the buffer, so writers never wait for the database.
	flushing sync.Mutex
	mu       sync.Mutex
	buf      logBuffer
	next     int64
	// taken counts the command output accepted, toward budget (the lower
	// of MaxPhaseLogBytes and what the run's cap leaves); cut is set once
	// output was dropped, and marked once the run records it.
	taken  int64
	budget int64
	runCap bool
	cut    bool
	marked bool
}

// LastLogSequence is the sequence of a visible run's newest chunk (0
// before the first).
func (s *Service) LastLogSequence(ctx context.Context, p access.Principal, runID string) (int64, error) {
	r, err := s.GetRun(ctx, p, runID)
	if err != nil {
		return 0, err
	}
	return s.lastSequence(ctx, r.ID)
}

func (s *Service) lastSequence(ctx context.Context, runID string) (int64, error) {
	var last int64
	// Sealed segments keep their sequences: a live reader resumes after them.
	if err := s.db.GetContext(ctx, &last, `SELECT greatest(
		(SELECT coalesce(max(sequence), 0) FROM run_log_chunks WHERE run_id = $1),
		(SELECT coalesce(max(last_sequence), 0) FROM run_log_segments WHERE run_id = $1))`, runID); err != nil {
		return 0, fmt.Errorf("reading log position: %w", err)
	}
	return last, nil
}

// NewLogSink opens a sink that appends after the run's newest chunk.
// secrets are masked in every form the CLI may print them.
func (s *Service) NewLogSink(ctx context.Context, runID, phase string, secrets []string) (*LogSink, error) {
	var pos struct {
		Last  int64 `db:"last"`
		Bytes int64 `db:"bytes"`
	}
	// Sealed segments count: their sequences are never reused, and their
	// text toward the run's cap.
	if err := s.db.GetContext(ctx, &pos, `SELECT
		greatest((SELECT coalesce(max(sequence), 0) FROM run_log_chunks WHERE run_id = $1),
			(SELECT coalesce(max(last_sequence), 0) FROM run_log_segments WHERE run_id = $1)) AS last,
		(SELECT coalesce(sum(octet_length(body)), 0) FROM run_log_chunks WHERE run_id = $1)
			+ (SELECT coalesce(sum(text_bytes), 0) FROM run_log_segments WHERE run_id = $1) AS bytes`, runID); err != nil {
		return nil, fmt.Errorf("reading log position: %w", err)
	}
	l := &LogSink{s: s, runID: runID, phase: phase, buf: newLogBuffer(secrets), next: pos.Last + 1, budget: MaxPhaseLogBytes}
	if left := max(s.opts.RunLogMaxBytes-pos.Bytes, 0); left < l.budget {
		l.budget, l.runCap = left, true
	}
	return l, nil
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
	if left := l.budget - l.taken; int64(len(p)) > left {
		take, l.cut = p[:left], true
	}
	l.taken += int64(len(take))
	l.buf.write(take)
	if l.cut {
		l.buf.dropUnfinished()
		l.buf.write([]byte(l.truncationMarker()))
	}
	return len(p), nil
}

// truncationMarker is the line a reader of the log finds where output was
// dropped, naming the cap that dropped it.
func (l *LogSink) truncationMarker() string {
	if l.runCap {
		return fmt.Sprintf("\n(Cairn: this run's log passed %d MiB; the rest of this output is not kept.)\n", l.s.opts.RunLogMaxBytes>>20)
	}
	return fmt.Sprintf("\n(Cairn: this phase's output passed %d MiB; the rest of it is not kept.)\n", MaxPhaseLogBytes>>20)
}

// Flush stores buffered complete lines; final also stores the unfinished
// last line. What fails to store stays buffered for the next flush. Once
// the phase's rows pass the segment threshold they move into a sealed
// segment; a failure there keeps them in the table for the next flush.
func (l *LogSink) Flush(ctx context.Context, final bool) error {
	l.flushing.Lock()
	defer l.flushing.Unlock()
	l.mu.Lock()
	body := l.buf.take(final)
	seq := l.next
	mark := l.cut && !l.marked
	l.mu.Unlock()
	if mark {
		if _, err := l.s.db.ExecContext(ctx, `UPDATE runs SET log_truncated = true WHERE id = $1`, l.runID); err != nil {
			return fmt.Errorf("marking log truncated: %w", err)
		}
		l.mu.Lock()
		l.marked = true
		l.mu.Unlock()
	}
	var err error
	for _, chunk := range logChunks(body) {
		err = insertLogChunk(ctx, l.s.db, l.runID, seq, l.phase, chunk)
		if db.IsUniqueViolation(err, "run_log_chunks_pkey") {
			// Another sink of the run took the sequence: a plan attempt
			// writes its policy log with a sink of its own after its
			// plan log. The chunk goes after the newest instead.
			var last int64
			if last, err = l.s.lastSequence(ctx, l.runID); err == nil {
				seq = last + 1
				err = insertLogChunk(ctx, l.s.db, l.runID, seq, l.phase, chunk)
			}
		}
		if err != nil {
			break
		}
		body = body[len(chunk):]
		seq++
	}
	l.mu.Lock()
	l.next = seq
	l.buf.putBack(body)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	if err := l.s.sealLogs(ctx, l.runID, l.phase); err != nil {
		l.s.logger.WarnContext(ctx, "log segment not sealed; the chunks stay in the table", "run_id", l.runID, "error", err)
	}
	return nil
}

// logBuffer is what a LogSink does without the database: it masks
// complete lines, cuts a line that grows past a chunk without ending, and
// makes the text storable. Nothing is masked before it is known whether a
// secret (a PEM key spans lines) continues past it.
type logBuffer struct {
	secrets []string
	masker  *strings.Replacer
	forms   []maskForm
	pending strings.Builder // masked, storable text not yet stored
	partial bytes.Buffer    // output not yet masked, raw
}

// maskForm is one spelling of a secret, with its KMP border table to find
// the start of an occurrence that later output may complete.
type maskForm struct {
	text      []byte
	border    []int // border[i]: longest proper prefix of text[:i+1] that is also its suffix
	multiline bool
}

func newLogBuffer(secrets []string) logBuffer {
	forms := maskedForms(secrets)
	b := logBuffer{secrets: secrets, masker: masker(forms)}
	for _, f := range forms {
		mf := maskForm{text: []byte(f), border: make([]int, len(f)), multiline: strings.ContainsRune(f, '\n')}
		for i, k := 1, 0; i < len(f); i++ {
			for k > 0 && f[i] != f[k] {
				k = mf.border[k-1]
			}
			if f[i] == f[k] {
				k++
			}
			mf.border[i] = k
		}
		b.forms = append(b.forms, mf)
	}
	return b
}

func (b *logBuffer) write(p []byte) {
	b.partial.Write(p)
	data := b.partial.Bytes()
	// Lines end where p has its last newline: the buffer before it had
	// none that was not held back for a secret spanning lines.
	end := 0
	if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
		end = len(data) - len(p) + i + 1
	}
	// A pathological line with no end is cut so the buffer stays bounded,
	// but not inside a character.
	long := len(data)-end > maxChunkSize
	if long {
		end = wholeRunes(data)
	}
	if end == 0 {
		return
	}
	cut := b.safeCut(data, end, long)
	b.emit(data[:cut])
	b.keep(data[cut:])
}

// take returns the text ready to store, with the unfinished line when
// final, and forgets it.
func (b *logBuffer) take(final bool) string {
	if final && b.partial.Len() > 0 {
		b.emit(b.partial.Bytes())
		b.partial.Reset()
	}
	body := b.pending.String()
	b.pending.Reset()
	return body
}

// putBack returns text take gave out but that was not stored, ahead of
// anything buffered since.
func (b *logBuffer) putBack(body string) {
	if body == "" {
		return
	}
	later := b.pending.String()
	b.pending.Reset()
	b.pending.WriteString(body)
	b.pending.WriteString(later)
}

// emit masks raw output and makes it storable: PostgreSQL text holds
// neither invalid UTF-8 nor NUL, which a provider or a local-exec script
// may well print, and a chunk it refuses would lose the log.
func (b *logBuffer) emit(raw []byte) {
	masked := b.masker.Replace(string(raw))
	masked = strings.ToValidUTF8(masked, "\uFFFD")
	b.pending.WriteString(strings.ReplaceAll(masked, "\x00", "\uFFFD"))
}

// dropUnfinished forgets output not yet masked: the unfinished line, and
// anything held back for a secret that may continue.
func (b *logBuffer) dropUnfinished() { b.partial.Reset() }

func (b *logBuffer) keep(rest []byte) {
	rest = bytes.Clone(rest)
	b.partial.Reset()
	b.partial.Write(rest)
}

// safeCut moves a cut at end to where the text before it can be masked on
// its own: back to the start of any secret that output still to come may
// complete, then forward past any secret found whole across the cut (which
// masks it whole). Only a long line, or a secret spanning lines, can reach
// back across a line end.
func (b *logBuffer) safeCut(data []byte, end int, long bool) int {
	cut := end
	for _, f := range b.forms {
		if !long && !f.multiline {
			continue
		}
		if s := len(data) - f.unfinished(data); s < cut {
			cut = s
		}
	}
	for moved := true; moved; {
		moved = false
		for _, f := range b.forms {
			lo := max(cut-len(f.text)+1, 0)
			hi := min(cut+len(f.text)-1, len(data))
			if lo >= hi {
				continue
			}
			// An occurrence starting in [lo, cut) ends after cut.
			if i := bytes.Index(data[lo:hi], f.text); i >= 0 && lo+i < cut {
				cut, moved = lo+i+len(f.text), true
			}
		}
	}
	return cut
}

// unfinished is the length of the longest end of data that is a proper
// start of the form: an occurrence that more output may complete.
func (f maskForm) unfinished(data []byte) int {
	k := 0
	for _, c := range data[max(len(data)-len(f.text)+1, 0):] {
		for k > 0 && c != f.text[k] {
			k = f.border[k-1]
		}
		if c == f.text[k] {
			k++
		}
		if k == len(f.text) {
			k = f.border[k-1]
		}
	}
	return k
}

// wholeRunes is the length of data without a character cut short at its
// end.
func wholeRunes(data []byte) int {
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if utf8.FullRune(data[i:]) {
				return len(data)
			}
			return i
		}
	}
	return len(data)
}

// logChunks splits text into rows of at most maxChunkSize bytes, at the
// last line end when there is one and never inside a character.
func logChunks(body string) []string {
	var out []string
	for len(body) > 0 {
		n := min(len(body), maxChunkSize)
		if n < len(body) {
			if i := strings.LastIndexByte(body[:n], '\n'); i > 0 {
				n = i + 1
			}
			for n > 1 && !utf8.RuneStart(body[n]) {
				n--
			}
		}
		out = append(out, body[:n])
		body = body[n:]
	}
	return out
}

// maskedForms are the spellings of secrets the CLI or a provider may
// print (see package mask), however short the secret.
func maskedForms(secrets []string) []string { return mask.Forms(secrets) }

// masker replaces each form, longest first so a secret containing another
// is masked whole.
func masker(forms []string) *strings.Replacer {
	forms = slices.Clone(forms)
	// strings.Replacer tries old strings in argument order.
	slices.SortStableFunc(forms, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, redacted)
	}
	return strings.NewReplacer(pairs...)
}

// AddSecrets masks more secrets in everything not yet masked: values the
// runner learns after the sink opened (credentials redeemed inside sandbox
// start). Lines written before held none of them.
func (l *LogSink) AddSecrets(secrets []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	all := append(slices.Clone(l.buf.secrets), secrets...)
	rest := bytes.Clone(l.buf.partial.Bytes())
	pending := l.buf.pending.String()
	l.buf = newLogBuffer(all)
	l.buf.pending.WriteString(pending)
	l.buf.write(rest)
}

// Line appends one line written by the runner itself (not the CLI); it
// does not count toward MaxPhaseLogBytes.
func (l *LogSink) Line(format string, args ...any) {
	line := fmt.Appendf(nil, format+"\n", args...)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.write(line)
}
