package sweep

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/blobkey"
)

// Options tune a sweep.
type Options struct {
	// MinAge is how old an unreferenced object must be (DefaultMinAge when
	// zero).
	MinAge time.Duration
	// PageSize is the listing page (blob.MaxListPage when zero).
	PageSize int
}

// Service sweeps one blob store against one database.
type Service struct {
	db    *sqlx.DB
	blobs *blob.Store
	opts  Options
	now   func() time.Time
}

// NewService returns the sweep of blobs against conn.
func NewService(conn *sqlx.DB, blobs *blob.Store, opts Options) *Service {
	if opts.MinAge <= 0 {
		opts.MinAge = DefaultMinAge
	}
	if opts.PageSize <= 0 || opts.PageSize > blob.MaxListPage {
		opts.PageSize = blob.MaxListPage
	}
	return &Service{db: conn, blobs: blobs, opts: opts, now: time.Now}
}

// WithClock returns a copy of the service that reads the time from now.
func (s *Service) WithClock(now func() time.Time) *Service {
	c := *s
	c.now = now
	return &c
}

// Sweep pages through the store (only under its prefix) and deletes every
// object whose key is exactly Cairn's, older than MinAge, that no
// committed row references. The reference
// check runs per page, just before the page's deletions: a reference
// committed later would belong to an upload older than MinAge, which no
// upload lives that long to make.
func (s *Service) Sweep(ctx context.Context) (Report, error) {
	var report Report
	if s.blobs == nil {
		// Not an empty sweep: a worker without storage never registers
		// this job, so reaching here is a wiring fault to surface.
		return report, errors.New("sweeping orphaned blobs: no blob store")
	}
	cutoff := s.now().Add(-s.opts.MinAge)
	var token []byte
	for {
		page, next, err := s.blobs.ListPage(ctx, token, s.opts.PageSize)
		if err != nil {
			return report, err
		}
		report.Pages++
		report.Listed += len(page)
		candidates := make([]string, 0, len(page))
		for _, o := range page {
			switch {
			case !s.cairns(o.Key):
				report.Foreign++
			case !o.ModTime.Before(cutoff):
				report.Kept++
			default:
				candidates = append(candidates, o.Key)
			}
		}
		if len(candidates) > 0 {
			referenced, err := referencedKeys(ctx, s.db, candidates)
			if err != nil {
				return report, err
			}
			for _, k := range candidates {
				if referenced[k] {
					report.Kept++
					continue
				}
				if err := s.blobs.Delete(ctx, k); err != nil {
					return report, fmt.Errorf("sweeping %s: %w", k, err)
				}
				report.Deleted++
			}
		}
		if len(next) == 0 {
			return report, nil
		}
		token = next
	}
}

// cairns reports whether key is exactly one Cairn writes, or what an
// interrupted write of one left behind.
func (s *Service) cairns(key string) bool {
	if written, ok := s.blobs.InterruptedWriteOf(key); ok {
		key = written
	}
	return blobkey.Recognised(key)
}
