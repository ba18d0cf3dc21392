package run

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"time"
)

// Timestamps records when each status was entered.
type Timestamps map[string]time.Time

// Scan reads a jsonb column.
func (t *Timestamps) Scan(src any) error { return scanJSON(src, t) }

// Value writes a jsonb column.
func (t Timestamps) Value() (driver.Value, error) { return valueJSON(t) }

// Timings break an attempt's duration down by step, in milliseconds.
type Timings map[string]float64

// Scan reads a jsonb column.
func (t *Timings) Scan(src any) error { return scanJSON(src, t) }

// Value writes a jsonb column.
func (t Timings) Value() (driver.Value, error) { return valueJSON(t) }

func scanJSON(src, dst any) error {
	switch v := src.(type) {
	case nil:
		return nil
	case []byte:
		return json.Unmarshal(v, dst)
	case string:
		return json.Unmarshal([]byte(v), dst)
	}
	return fmt.Errorf("scanning jsonb: unexpected %T", src)
}

// valueJSON passes JSON as a string: with binary parameters on, lib/pq
// sends []byte as bytea, which a jsonb column refuses.
func valueJSON(v any) (driver.Value, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}
