// Package blob stores Cairn's artifacts — state, configuration archives,
// plans, policy bundles — sealed and streamed. Objects are encrypted frame by
// frame on their way out of the process, so bodies up to 100 MB move in
// constant memory, and a write that crosses its limit or fails leaves no
// object behind. The database holds the metadata and digests; this package
// holds only ciphertext.
package blob
