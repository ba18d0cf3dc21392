// Package reqid issues request IDs ("req_…") and carries them through a
// context, so every log line, audit record and error of one request can be
// tied together without passing the ID by hand.
package reqid
