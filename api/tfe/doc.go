// Package tfe is the remote-backend API under /api/v2: the JSON:API dialect
// that the OpenTofu CLI's cloud block and go-tfe speak, plus service
// discovery. Every route but ping first validates the bearer credential,
// resolves a bounded ownership projection inside the credential's own
// organization, and passes launch admission before any body is read; state
// bytes arrive through signed, expiring upload URLs and are streamed into
// sealed storage.
package tfe
