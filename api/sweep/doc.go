// Package sweep deletes orphaned artifact objects: sealed objects in blob
// storage that no committed row references. Every deletion path removes the
// logical reference first and the object after, so an object whose delete
// failed, an upload whose reference never committed, and everything a
// deleted organization left behind end up here. The sweep pages through the
// store (under CAIRN_BLOB_PREFIX when one is set), deletes only keys that
// match Cairn's key grammar exactly (blobkey.Recognised) and are older than
// a minimum age (in-flight uploads commit long before), and never touches
// anything else in the bucket.
package sweep
