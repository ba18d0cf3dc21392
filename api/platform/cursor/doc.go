// Package cursor implements the cursor-list contract shared by every /v1
// list: newest first by creation time then ID, pages of 1–100 rows, and
// opaque cursors authenticated with an HMAC and bound to one endpoint and its
// filters, so a cursor from elsewhere, an edited one or a hand-made timestamp
// is rejected rather than silently reinterpreted.
package cursor
