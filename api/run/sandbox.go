package run

import (
	"context"
	"database/sql/driver"
	"fmt"
)

// Sandbox isolation values a worker records (the sandbox package's).
const (
	SandboxNamespaces  = "namespaces"
	SandboxUnisolated  = "none"
	SandboxUnavailable = "unavailable"
)

// SandboxCeiling is one resource ceiling as a sandbox applied it.
type SandboxCeiling struct {
	Limit     uint64 `json:"limit"`
	Mechanism string `json:"mechanism"`
}

// SandboxProfile is what an attempt's sandbox really applied, recorded by
// its worker: evidence, never configuration.
type SandboxProfile struct {
	Driver     string   `json:"driver"`
	Isolation  string   `json:"isolation"`
	Reason     string   `json:"reason,omitempty"`
	Namespaces []string `json:"namespaces,omitempty"`
	// Base and BaseDigest identify the managed base the sandbox started
	// from (SPEC §1 rule 10); empty where commands saw the host.
	Base       string         `json:"base,omitempty"`
	BaseDigest string         `json:"base_digest,omitempty"`
	Network    string         `json:"network,omitempty"`
	User       string         `json:"user,omitempty"`
	Memory     SandboxCeiling `json:"memory"`
	Processes  SandboxCeiling `json:"processes"`
	CPUSeconds uint64         `json:"cpu_seconds,omitempty"`
	OpenFiles  uint64         `json:"open_files,omitempty"`
	FileBytes  uint64         `json:"file_bytes,omitempty"`
}

// Scan reads a jsonb column.
func (p *SandboxProfile) Scan(src any) error { return scanJSON(src, p) }

// Value writes a jsonb column.
func (p SandboxProfile) Value() (driver.Value, error) { return valueJSON(p) }

// BaseProfile names the sandbox base a run's attempts ran on, from their
// recorded profiles: "<driver>-namespaces" or "<driver>-unisolated" for
// attempts that ran user code, "<driver>-isolation-unavailable" when every
// recorded attempt was refused. When attempts differ, the weakest isolation
// that ran user code is named, so the review never overstates it. ok is
// false while no attempt recorded a profile.
func BaseProfile(attempts []Attempt) (name string, ok bool) {
	rank := map[string]int{SandboxUnavailable: 0, SandboxNamespaces: 1, SandboxUnisolated: 2}
	var chosen *SandboxProfile
	for _, a := range attempts {
		p := a.SandboxProfile
		if p == nil {
			continue
		}
		if _, known := rank[p.Isolation]; !known {
			// An isolation this code does not know claims nothing.
			return p.Driver + "-unknown", true
		}
		if chosen == nil || rank[p.Isolation] > rank[chosen.Isolation] {
			chosen = p
		}
	}
	if chosen == nil {
		return "", false
	}
	switch chosen.Isolation {
	case SandboxNamespaces:
		return chosen.Driver + "-namespaces", true
	case SandboxUnisolated:
		return chosen.Driver + "-unisolated", true
	}
	return chosen.Driver + "-isolation-unavailable", true
}

// RecordSandbox notes the sandbox an attempt created and what it applies,
// as evidence.
func (s *Service) RecordSandbox(ctx context.Context, attemptID, sandboxID string, profile SandboxProfile) error {
	_, err := s.db.ExecContext(ctx, `UPDATE run_attempts SET sandbox_id = $2, sandbox_profile = $3 WHERE id = $1`,
		attemptID, sandboxID, profile)
	if err != nil {
		return fmt.Errorf("recording sandbox: %w", err)
	}
	return nil
}
