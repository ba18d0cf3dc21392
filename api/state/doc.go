// Package state is workspace state: immutable versions numbered per
// workspace. A version is declared by the writer that holds the workspace
// lock (serial must grow and lineage match unless forced), receives its
// bytes through a signed upload, and becomes current only once the bytes
// match the declared MD5. Bytes are sealed in blob storage and streamed in
// constant memory; the root outputs are parsed on the way in, and a
// sensitive output's value is never kept outside the sealed state.
package state
