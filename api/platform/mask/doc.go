// Package mask names the spellings in which a secret can reach a log, an
// error or a plan: the value itself, escaped as Go and JSON print strings,
// in base64 (standard and URL alphabets) and URL-encoded. The log sink and
// the plan diff's redaction both ask it, so a spelling added here is hidden
// everywhere at once.
package mask
