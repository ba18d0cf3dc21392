// Package blobkey is the grammar of the object keys Cairn writes to blob
// storage: one constructor per layout, which every writer uses, and one
// recogniser, Recognised, which accepts exactly what those constructors
// make. The orphan sweep deletes only recognised keys, so in a bucket
// shared with other tools an object is Cairn's to remove only when its key
// could have come from here: a known root, the right number of segments,
// Cairn's own ID prefixes and lengths, the artifact kinds Cairn writes and
// their exact suffixes. It also checks CAIRN_BLOB_PREFIX, the part of a
// shared bucket Cairn is confined to.
package blobkey
