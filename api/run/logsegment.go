package run

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/blobkey"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/id"
)

const (
	// DefaultLogSegmentBytes is how much of one phase's log stays in table
	// rows before it moves into a sealed blob: enough that a short run never
	// touches storage, little enough that a long log does not bloat the
	// table or any read of it.
	DefaultLogSegmentBytes = 1 << 20
	// DefaultRunLogMaxBytes caps the command output one run keeps.
	DefaultRunLogMaxBytes = 64 << 20
	// recordHeader is a segment record's fixed part: sequence, creation
	// time in Unix nanoseconds, body length.
	recordHeader = 8 + 8 + 4
)

// errLogMoved means the chunks a segment was cut from changed while it was
// sealed (another writer sealed or added them); the segment is discarded.
var errLogMoved = errors.New("log chunks changed while sealing")

// logSegment is the row of one sealed segment: a phase's chunks
// FirstSequence through LastSequence, whose text starts PhaseOffset bytes
// into the phase's log.
type logSegment struct {
	ID             string `db:"id"`
	OrganizationID string `db:"organization_id"`
	RunID          string `db:"run_id"`
	Phase          string `db:"phase"`
	FirstSequence  int64  `db:"first_sequence"`
	LastSequence   int64  `db:"last_sequence"`
	ChunkCount     int    `db:"chunk_count"`
	PhaseOffset    int64  `db:"phase_offset"`
	TextBytes      int64  `db:"text_bytes"`
	BlobKey        string `db:"blob_key"`
	SHA256         []byte `db:"sha256"`
}

const segmentColumns = `id, organization_id, run_id, phase, first_sequence, last_sequence, chunk_count, phase_offset,
	text_bytes, blob_key, sha256`

func logSegmentIdentity(organizationID, runID, segmentID string) string {
	return "cairn/run-log/" + organizationID + "/" + runID + "/" + segmentID
}

// sealLogs moves a phase's table chunks into one sealed segment once they
// hold more than LogSegmentBytes of text. The object is written first and
// its row committed with the chunks' deletion in one transaction; a
// failure leaves the chunks where they were and at most an unreferenced
// object, which the orphan sweep removes.
func (s *Service) sealLogs(ctx context.Context, runID, phase string) error {
	if s.blobs == nil {
		return nil
	}
	var pending struct {
		Bytes int64 `db:"bytes"`
		First int64 `db:"first"`
		Last  int64 `db:"last"`
		Count int   `db:"count"`
	}
	if err := s.db.GetContext(ctx, &pending, `SELECT coalesce(sum(octet_length(body)), 0) AS bytes,
		coalesce(min(sequence), 0) AS first, coalesce(max(sequence), 0) AS last, count(*) AS count
		FROM run_log_chunks WHERE run_id = $1 AND phase = $2`, runID, phase); err != nil {
		return fmt.Errorf("measuring table log: %w", err)
	}
	if pending.Bytes < s.opts.LogSegmentBytes {
		return nil
	}
	var organizationID string
	if err := s.db.GetContext(ctx, &organizationID, `SELECT organization_id FROM runs WHERE id = $1`, runID); err != nil {
		return fmt.Errorf("reading run owner: %w", err)
	}
	seg := logSegment{ID: id.New("logseg"), OrganizationID: organizationID, RunID: runID, Phase: phase,
		FirstSequence: pending.First, LastSequence: pending.Last}
	seg.BlobKey = blobkey.RunLogSegment(organizationID, runID, seg.ID)

	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		count, text, err := s.writeSegment(ctx, pw, seg)
		seg.ChunkCount, seg.TextBytes = count, text
		pw.CloseWithError(err)
		done <- err
	}()
	// A segment's records are its chunks plus their headers.
	limit := pending.Bytes + int64(pending.Count)*recordHeader
	d, err := s.blobs.Put(ctx, seg.BlobKey, logSegmentIdentity(organizationID, runID, seg.ID), pr, limit)
	pr.CloseWithError(io.ErrClosedPipe)
	if writeErr := <-done; err == nil {
		err = writeErr
	}
	if err != nil {
		return fmt.Errorf("sealing log segment: %w", err)
	}
	seg.SHA256 = d.SHA256
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT 1 FROM runs WHERE id = $1 FOR UPDATE`, runID); err != nil {
			return fmt.Errorf("locking run: %w", err)
		}
		if err := tx.GetContext(ctx, &seg.PhaseOffset, `SELECT coalesce(sum(text_bytes), 0) FROM run_log_segments
			WHERE run_id = $1 AND phase = $2`, runID, phase); err != nil {
			return fmt.Errorf("reading segment offset: %w", err)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM run_log_chunks WHERE run_id = $1 AND phase = $2 AND sequence BETWEEN $3 AND $4`,
			runID, phase, seg.FirstSequence, seg.LastSequence)
		if err != nil {
			return fmt.Errorf("removing sealed chunks: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(seg.ChunkCount) {
			return errLogMoved
		}
		_, err = sqlx.NamedExecContext(ctx, tx, `INSERT INTO run_log_segments (`+segmentColumns+`)
			VALUES (:id, :organization_id, :run_id, :phase, :first_sequence, :last_sequence, :chunk_count, :phase_offset,
			:text_bytes, :blob_key, :sha256)`, seg)
		if err != nil {
			return fmt.Errorf("recording log segment: %w", err)
		}
		return nil
	})
	if err != nil {
		// No row references the object: it can go at once.
		_ = s.blobs.Delete(context.WithoutCancel(ctx), seg.BlobKey)
		return err
	}
	return nil
}

// writeSegment streams a segment's chunks from the table into w as
// records, returning how many chunks and text bytes it wrote.
func (s *Service) writeSegment(ctx context.Context, w io.Writer, seg logSegment) (int, int64, error) {
	rows, err := s.db.QueryxContext(ctx, `SELECT sequence, phase, body, created_at FROM run_log_chunks
		WHERE run_id = $1 AND phase = $2 AND sequence BETWEEN $3 AND $4 ORDER BY sequence`,
		seg.RunID, seg.Phase, seg.FirstSequence, seg.LastSequence)
	if err != nil {
		return 0, 0, fmt.Errorf("reading chunks to seal: %w", err)
	}
	defer rows.Close()
	bw := bufio.NewWriter(w)
	count, text := 0, int64(0)
	for rows.Next() {
		var c LogChunk
		if err := rows.StructScan(&c); err != nil {
			return 0, 0, fmt.Errorf("reading chunk to seal: %w", err)
		}
		if err := writeRecord(bw, c); err != nil {
			return 0, 0, err
		}
		count++
		text += int64(len(c.Body))
	}
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("reading chunks to seal: %w", err)
	}
	if count == 0 {
		return 0, 0, errLogMoved
	}
	return count, text, bw.Flush()
}

func writeRecord(w io.Writer, c LogChunk) error {
	var h [recordHeader]byte
	binary.BigEndian.PutUint64(h[0:8], uint64(c.Sequence))
	binary.BigEndian.PutUint64(h[8:16], uint64(c.CreatedAt.UnixNano()))
	binary.BigEndian.PutUint32(h[16:20], uint32(len(c.Body)))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	_, err := io.WriteString(w, c.Body)
	return err
}

// segmentReader decodes a segment's records one at a time: memory holds at
// most one chunk, whatever the segment's size.
type segmentReader struct {
	r     *bufio.Reader
	c     io.Closer
	phase string
}

func (s *Service) openSegment(ctx context.Context, seg logSegment) (*segmentReader, error) {
	blobs, err := s.storage()
	if err != nil {
		return nil, err
	}
	rc, err := blobs.Open(ctx, seg.BlobKey, logSegmentIdentity(seg.OrganizationID, seg.RunID, seg.ID))
	if err != nil {
		return nil, fmt.Errorf("opening log segment: %w", err)
	}
	return &segmentReader{r: bufio.NewReader(rc), c: rc, phase: seg.Phase}, nil
}

// header reads the next record's sequence, time and body length; io.EOF
// after the last one.
func (sr *segmentReader) header() (int64, time.Time, int, error) {
	var h [recordHeader]byte
	if _, err := io.ReadFull(sr.r, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, time.Time{}, 0, fmt.Errorf("log segment cut short: %w", err)
		}
		return 0, time.Time{}, 0, err
	}
	n := binary.BigEndian.Uint32(h[16:20])
	if n > maxChunkSize {
		return 0, time.Time{}, 0, errors.New("log segment record over the chunk size")
	}
	return int64(binary.BigEndian.Uint64(h[0:8])), time.Unix(0, int64(binary.BigEndian.Uint64(h[8:16]))).UTC(), int(n), nil
}

// next returns the next whole chunk.
func (sr *segmentReader) next() (LogChunk, error) {
	seq, at, n, err := sr.header()
	if err != nil {
		return LogChunk{}, err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(sr.r, body); err != nil {
		return LogChunk{}, fmt.Errorf("log segment cut short: %w", err)
	}
	return LogChunk{Sequence: seq, Phase: sr.phase, Body: string(body), CreatedAt: at}, nil
}

func (sr *segmentReader) Close() error { return sr.c.Close() }

// segmentText reads the text of a segment's records, skipping headers.
type segmentText struct {
	sr   *segmentReader
	left int // body bytes left in the current record
}

func (t *segmentText) Read(p []byte) (int, error) {
	for t.left == 0 {
		_, _, n, err := t.sr.header()
		if err != nil {
			return 0, err
		}
		t.left = n
	}
	if len(p) > t.left {
		p = p[:t.left]
	}
	n, err := t.sr.r.Read(p)
	t.left -= n
	if errors.Is(err, io.EOF) && t.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// inLogSnapshot runs read inside one repeatable-read, read-only
// transaction: a segment sealed meanwhile is seen either as its table rows
// or as the segment, never as neither or both.
func (s *Service) inLogSnapshot(ctx context.Context, read func(tx *sqlx.Tx) error) error {
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("reading logs: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	if err := read(tx); err != nil {
		return err
	}
	return tx.Commit()
}
