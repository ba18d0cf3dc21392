// Package id issues the opaque, prefixed identifiers of Cairn's resources
// (ws_, run_, cfg_, pol_, …). They are random rather than sequential so that
// one tenant cannot learn anything about another from an ID.
package id
