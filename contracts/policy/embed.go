package policycontract

import (
	_ "embed"
	"strings"
)

// CapabilitiesJSON is the capabilities manifest exactly as committed.
//
//go:embed cairn-rego-capabilities-v1.json
var CapabilitiesJSON []byte

//go:embed cairn-rego-capabilities-v1.json.sha256
var capabilitiesDigestFile string

// CapabilitiesSHA256 is the committed lowercase hex SHA-256 of
// CapabilitiesJSON. Readers compare it with the embedded bytes before using
// them, so a manifest edited without its digest fails closed.
var CapabilitiesSHA256 = strings.TrimSpace(capabilitiesDigestFile)
